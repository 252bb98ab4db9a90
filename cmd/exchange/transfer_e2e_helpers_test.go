package main

// Helpers of the internal-transfer acceptance tests (transfer_e2e_test.go):
// a per-subtest view of a server, FUNDING deposits and SPOT credits,
// transfers and their polling, balances of both sides, fault injection, the
// conservation check, and Postgres probes (transfers_tb, transfer_operations,
// balances_tb and a test-only trigger recording every state change).

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// xferFlags are the server flags of most transfer tests: faults on, a 1 s
// recovery threshold (the worker scans every 0.5 s), no rate limits.
var xferFlags = []string{"--enable-fault-injection", "--transfer-stale-after", "1s",
	"--transfer-rate-per-second", "0", "--transfer-per-day", "0"}

// xferScale is the scale (= transfer precision) of the built-in assets.
var xferScale = map[string]int{"USDT": 6, "BTC": 8, "ETH": 8, "SUS": 8, "NOX": 8} // SUS, NOX: ASSET-STATUS

// Transfer state ids (spec 2.1, transfers_tb.state).
const (
	stInit          = 0
	stSourcePending = 10
	stSourceDone    = 20
	stTargetPending = 30
	stCommitted     = 40
	stFailed        = -10
	stCompensating  = -20
	stRolledBack    = -30
)

var stateName = map[int]string{stInit: "INIT", stSourcePending: "SOURCE_PENDING", stSourceDone: "SOURCE_DONE",
	stTargetPending: "TARGET_PENDING", stCommitted: "COMMITTED", stFailed: "FAILED", stCompensating: "COMPENSATING",
	stRolledBack: "ROLLED_BACK"}

func terminalState(s string) bool { return s == "COMMITTED" || s == "FAILED" || s == "ROLLED_BACK" }

// xferUsers hands out user ids unique across the whole test binary, so the
// tests sharing one server never see each other's accounts.
var xferUsers atomic.Uint64

func init() { xferUsers.Store(20_000) }

var xferRefs atomic.Uint64

// with is a view of s whose failures are reported on t (a subtest using a
// server started by its parent).
func (s *e2eServer) with(t *testing.T) *e2eServer {
	c := *s
	c.t = t
	return &c
}

// xt is one test's handle on a server and its database.
type xt struct {
	*testing.T
	s     *e2eServer
	pg    string
	admin string
	conn  *pgx.Conn // lazily opened, closed at the test's end
	dir   string    // data dir and flags of a server the test restarts
	flags []string
}

func newXT(t *testing.T, s *e2eServer, pg string) *xt {
	x := &xt{T: t, pg: pg}
	x.use(s)
	return x
}

// use rebinds x to a (restarted) server, once its transfer service answers.
func (x *xt) use(s *e2eServer) {
	x.s = s.with(x.T)
	x.admin = x.s.token(1, true)
	x.transfersReady()
}

// inFusedTransaction requires that the FUNDING operation op of reqID and
// the transfer's state were written by one transaction (the same xmin): a
// FUNDING fault injected through /admin/v1/faults lands inside the fused
// transaction of the one path production runs (issue 34), which a call of
// its own, or a fault source on another Batcher, would not.
func (x *xt) inFusedTransaction(reqID, op string) {
	x.Helper()
	if n := x.queryInt(`SELECT count(*) FROM transfers_tb t JOIN transfer_operations o
		ON o.req_id = t.req_id AND o.op = $2 WHERE t.req_id = $1 AND t.xmin = o.xmin`, reqID, op); n != 1 {
		x.Fatalf("transfer %s: its %s record and its state are not one transaction's", reqID, op)
	}
}

// transfersReady checks that the transfer service answers as soon as the
// server is ready (issue 20: ready means every feature has initialised).
func (x *xt) transfersReady() {
	x.Helper()
	if st, b := x.s.do("GET", "/api/v1/internal_transfers", x.s.token(1, false), nil); st != 200 {
		x.Fatalf("ready, but the transfer service answers %d %v", st, b)
	}
}

func (x *xt) user() uint64 { return xferUsers.Add(1) }

func (x *xt) tok(user uint64) string { return x.s.token(user, false) }

// units parses a decimal string of asset into its units.
func units(t testing.TB, asset, amount string) int64 {
	t.Helper()
	scale, ok := xferScale[asset]
	if !ok {
		t.Fatalf("no scale for %s", asset)
	}
	r, ok := new(big.Rat).SetString(amount)
	if !ok {
		t.Fatalf("bad decimal %q", amount)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !r.IsInt() {
		t.Fatalf("%q has more than %d decimals", amount, scale)
	}
	return r.Num().Int64()
}

// deposit credits an external deposit into the user's FUNDING account.
func (x *xt) deposit(user uint64, asset, amount string) {
	x.Helper()
	ref := fmt.Sprintf("xdep-%d-%d", user, xferRefs.Add(1))
	st, b := x.s.do("POST", "/admin/v1/deposit", x.admin, map[string]any{"user_id": user, "asset": asset, "amount": amount, "tx_ref": ref})
	if st != 200 || b["credited"] != true {
		x.Fatalf("deposit %s %s to %d: %d %v", amount, asset, user, st, b)
	}
}

// credit gives the user SPOT funds through the operator adjustment.
func (x *xt) credit(user uint64, asset, amount string) {
	x.Helper()
	ref := fmt.Sprintf("xadj-%d-%d", user, xferRefs.Add(1))
	st, b := x.s.do("POST", "/admin/v1/adjust", x.admin, map[string]any{"user_id": user, "asset": asset, "amount": amount, "ref": ref})
	if st != 200 {
		x.Fatalf("adjust %s %s to %d: %d %v", amount, asset, user, st, b)
	}
}

// body builds a transfer request; kv adds or (with a nil value) removes members.
func xferBody(from, to, asset string, amount any, kv ...any) map[string]any {
	m := map[string]any{"from": from, "to": to, "asset": asset, "amount": amount}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	return m
}

// xfer posts a transfer as user.
func (x *xt) xfer(user uint64, from, to, asset string, amount any, kv ...any) (int, map[string]any) {
	x.Helper()
	return x.s.do("POST", "/api/v1/internal_transfer", x.tok(user), xferBody(from, to, asset, amount, kv...))
}

// commit posts a transfer that must answer 200 COMMITTED and returns it.
func (x *xt) commit(user uint64, from, to, asset, amount string, kv ...any) map[string]any {
	x.Helper()
	st, b := x.xfer(user, from, to, asset, amount, kv...)
	if st != 200 || b["state"] != "COMMITTED" || b["state_id"] != float64(stCommitted) {
		x.Fatalf("transfer %s %s %s->%s of %d: got %d %v, want 200 COMMITTED", amount, asset, from, to, user, st, b)
	}
	if dec(x.T, b["amount"], xferScale[asset]) != units(x.T, asset, amount) || b["from"] != from || b["to"] != to ||
		b["asset"] != asset || id(x.T, b["user_id"]) != user {
		x.Fatalf("transfer answer does not echo the request: %v", b)
	}
	return b
}

// refused posts a transfer that must be refused with status and code, and
// checks that neither account of the user moved.
func (x *xt) refused(what string, user uint64, body any, status int, code string) map[string]any {
	x.Helper()
	before := x.bal(user)
	st, b := x.s.do("POST", "/api/v1/internal_transfer", x.tok(user), body)
	wantCode(x.T, what, st, b, status, code)
	if after := x.bal(user); fmt.Sprint(after) != fmt.Sprint(before) {
		x.Fatalf("%s: balances moved on a refusal: %v -> %v", what, before, after)
	}
	return b
}

func reqIDOf(t testing.TB, b map[string]any) string {
	t.Helper()
	r, _ := b["req_id"].(string)
	if len(r) != 26 {
		t.Fatalf("answer without a 26-character req_id: %v", b)
	}
	return r
}

// get reads a transfer as its user (200 required).
func (x *xt) get(user uint64, reqID string) map[string]any {
	x.Helper()
	st, b := x.s.do("GET", "/api/v1/internal_transfer/"+reqID, x.tok(user), nil)
	if st != 200 || b["req_id"] != reqID {
		x.Fatalf("GET transfer %s: %d %v", reqID, st, b)
	}
	return b
}

// waitFor polls the transfer every 50 ms until pred holds (within d).
func (x *xt) waitFor(user uint64, reqID, what string, d time.Duration, pred func(map[string]any) bool) map[string]any {
	x.Helper()
	deadline := time.Now().Add(d)
	for {
		b := x.get(user, reqID)
		if pred(b) {
			return b
		}
		if time.Now().After(deadline) {
			x.Fatalf("transfer %s: not %s after %v: %v", reqID, what, d, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitTerminal waits until the transfer is COMMITTED, FAILED or ROLLED_BACK
// and requires want.
func (x *xt) waitTerminal(user uint64, reqID, want string) map[string]any {
	x.Helper()
	b := x.waitFor(user, reqID, "terminal", 30*time.Second, func(b map[string]any) bool {
		s, _ := b["state"].(string)
		return terminalState(s)
	})
	if b["state"] != want {
		x.Fatalf("transfer %s ended %v, want %s: %v", reqID, b["state"], want, b)
	}
	return b
}

// acct is one asset of a user: SPOT available/frozen and FUNDING available (units).
type acct struct {
	Spot, Frozen, Funding int64
	Status                string // FUNDING status ("" = no row)
}

// bal reads GET /api/v1/balances of user, both sides.
func (x *xt) bal(user uint64) map[string]acct {
	x.Helper()
	st, body := x.s.do("GET", "/api/v1/balances", x.tok(user), nil)
	if st != 200 {
		x.Fatalf("balances: %d %v", st, body)
	}
	list, _ := body["balances"].([]any)
	out := map[string]acct{}
	for _, e := range list {
		m := e.(map[string]any)
		a := m["asset"].(string)
		sc := xferScale[a]
		sp, _ := m["spot"].(map[string]any)
		fu, _ := m["funding"].(map[string]any)
		if sp == nil || fu == nil {
			x.Fatalf("balances without spot and funding: %v", body)
		}
		status, _ := fu["status"].(string)
		out[a] = acct{Spot: dec(x.T, sp["available"], sc), Frozen: dec(x.T, sp["frozen"], sc),
			Funding: dec(x.T, fu["available"], sc), Status: status}
	}
	return out
}

// wantBal requires the user's SPOT available and FUNDING available of asset (units).
func (x *xt) wantBal(user uint64, asset string, spot, funding int64) {
	x.Helper()
	b := x.bal(user)[asset]
	if b.Spot != spot || b.Funding != funding {
		x.Fatalf("user %d %s: spot %d funding %d, want spot %d funding %d", user, asset, b.Spot, b.Funding, spot, funding)
	}
}

// inject arms a fault; clearFaults disarms every fault.
func (x *xt) inject(adapter, op, mode string, count int) {
	x.Helper()
	st, b := x.s.do("POST", "/admin/v1/faults", x.admin, map[string]any{"adapter": adapter, "op": op, "mode": mode, "count": count})
	if st != 200 {
		x.Fatalf("inject %s %s %s: %d %v", adapter, op, mode, st, b)
	}
}

func (x *xt) clearFaults() {
	x.Helper()
	if st, b := x.s.do("DELETE", "/admin/v1/faults", x.admin, nil); st != 200 {
		x.Fatalf("clear faults: %d %v", st, b)
	}
}

// invariantOK runs the conservation check now and requires it to hold for
// every asset, with transfers not halted.
func (x *xt) invariantOK() map[string]any {
	x.Helper()
	st, b := x.s.do("GET", "/admin/v1/invariants", x.admin, nil)
	if st != 200 || b["ok"] != true || b["transfers_halted"] != false {
		x.Fatalf("conservation check: %d %v", st, b)
	}
	if an, ok := b["anomalies"].([]any); ok && len(an) != 0 {
		x.Fatalf("conservation check: anomalies: %v", b)
	}
	assets, _ := b["assets"].([]any)
	if len(assets) < 3 {
		x.Fatalf("conservation check without per-asset results: %v", b)
	}
	for _, a := range assets {
		m := a.(map[string]any)
		if m["ok"] != true {
			x.Fatalf("conservation check: asset %v not ok: %v", m["asset"], b)
		}
		if d, ok := m["diff"].(float64); ok && d != 0 {
			x.Fatalf("conservation check: asset %v diff %v: %v", m["asset"], d, b)
		}
	}
	return b
}

// metric reads a metric (0 when absent is NOT allowed: the metric must exist).
func (x *xt) metric(name string) float64 {
	x.Helper()
	return x.s.metric(name)
}

// --- Postgres probes ---

func (x *xt) db() *pgx.Conn {
	x.Helper()
	if x.conn == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, x.pg)
		if err != nil {
			x.Fatal(err)
		}
		x.conn = c
		x.Cleanup(func() { _ = c.Close(context.Background()) })
	}
	return x.conn
}

func (x *xt) exec(sql string, args ...any) int64 {
	x.Helper()
	tag, err := x.db().Exec(context.Background(), sql, args...)
	if err != nil {
		x.Fatalf("%s: %v", sql, err)
	}
	return tag.RowsAffected()
}

func (x *xt) queryInt(sql string, args ...any) int64 {
	x.Helper()
	var n int64
	if err := x.db().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		x.Fatalf("%s: %v", sql, err)
	}
	return n
}

// dbState is transfers_tb.state of reqID.
func (x *xt) dbState(reqID string) int {
	x.Helper()
	return int(x.queryInt(`SELECT state FROM transfers_tb WHERE req_id = $1`, reqID))
}

// onlyTransfer returns the req_id of the user's only transfer (for requests
// whose answer was lost to a crash).
func (x *xt) onlyTransfer(user uint64) string {
	x.Helper()
	rows, err := x.db().Query(context.Background(), `SELECT req_id FROM transfers_tb WHERE user_id = $1`, int64(user))
	if err != nil {
		x.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		x.Fatal(err)
	}
	if len(ids) != 1 {
		x.Fatalf("user %d has %d transfers, want 1: %v", user, len(ids), ids)
	}
	return ids[0]
}

// fundingRow is balances_tb.available of (user, asset), -1 without a row.
func (x *xt) fundingRow(user uint64, asset int) int64 {
	x.Helper()
	var v int64
	err := x.db().QueryRow(context.Background(), `SELECT available FROM balances_tb WHERE user_id = $1 AND asset_id = $2`,
		int64(user), asset).Scan(&v)
	if err == pgx.ErrNoRows {
		return -1
	}
	if err != nil {
		x.Fatal(err)
	}
	return v
}

// ops counts the funding adapter's records of (reqID, op) with result.
func (x *xt) ops(reqID, op, result string) int64 {
	x.Helper()
	return x.queryInt(`SELECT count(*) FROM transfer_operations WHERE req_id = $1 AND adapter = 'funding' AND op = $2 AND result = $3`,
		reqID, op, result)
}

// waitMigrated waits until the server created transfers_tb.
func (x *xt) waitMigrated() {
	x.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for x.queryInt(`SELECT count(*) FROM pg_class WHERE relname = 'transfers_tb'`) == 0 {
		if time.Now().After(deadline) {
			x.Fatal("transfers_tb not created after 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// installHistory adds a test-only trigger that records every committed
// state a transfer takes (its INSERT and each state change) in
// xtest_state_history, so the FSM's path can be checked exactly.
func (x *xt) installHistory() {
	x.Helper()
	x.waitMigrated()
	x.exec(`CREATE TABLE IF NOT EXISTS xtest_state_history (id bigserial PRIMARY KEY, req_id text NOT NULL,
		state smallint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	x.exec(`CREATE OR REPLACE FUNCTION xtest_state_history_fn() RETURNS trigger AS $$
		BEGIN
			IF TG_OP = 'INSERT' OR NEW.state IS DISTINCT FROM OLD.state THEN
				INSERT INTO xtest_state_history (req_id, state) VALUES (NEW.req_id, NEW.state);
			END IF;
			RETURN NEW;
		END $$ LANGUAGE plpgsql`)
	x.exec(`DROP TRIGGER IF EXISTS xtest_state_history_tr ON transfers_tb`)
	x.exec(`CREATE TRIGGER xtest_state_history_tr AFTER INSERT OR UPDATE ON transfers_tb
		FOR EACH ROW EXECUTE FUNCTION xtest_state_history_fn()`)
}

// flow returns the states reqID went through, in order, as names.
func (x *xt) flow(reqID string) []string {
	x.Helper()
	rows, err := x.db().Query(context.Background(), `SELECT state FROM xtest_state_history WHERE req_id = $1 ORDER BY id`, reqID)
	if err != nil {
		x.Fatal(err)
	}
	states, err := pgx.CollectRows(rows, pgx.RowTo[int16])
	if err != nil {
		x.Fatal(err)
	}
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = stateName[int(s)]
		if out[i] == "" {
			out[i] = fmt.Sprint(s)
		}
	}
	return out
}

// wantFlow requires the durable state path of reqID to be the spec's path
// want with, at most, states left out that the fused path keeps inside
// one transaction (a fused step writes only where its chain ends): in
// order, ending where want ends.
func (x *xt) wantFlow(reqID string, want ...string) {
	x.Helper()
	got := x.flow(reqID)
	rest := want
	for _, s := range got {
		i := slices.Index(rest, s)
		if i < 0 {
			x.Fatalf("transfer %s went %v, want %v or a part of it", reqID, got, want)
		}
		rest = rest[i+1:]
	}
	if len(got) == 0 || len(rest) != 0 {
		x.Fatalf("transfer %s went %v, want %v or a part of it ending %s", reqID, got, want, want[len(want)-1])
	}
}

// neverDurable requires that reqID was never committed in any of states.
func (x *xt) neverDurable(reqID string, states ...string) {
	x.Helper()
	for _, s := range x.flow(reqID) {
		if slices.Contains(states, s) {
			x.Fatalf("transfer %s went %v: %s was durable, the fused path never commits it", reqID, x.flow(reqID), s)
		}
	}
}

// --- logs ---

// criticals counts the server's CRITICAL log records (logging.LevelCritical)
// whose message contains msg and, if reqID is set, that name it.
func criticals(s *e2eServer, msg, reqID string) int {
	n := 0
	for _, line := range strings.Split(s.Logs(), "\n") {
		if !strings.Contains(line, `"level":"CRITICAL"`) {
			continue
		}
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		m, _ := rec["msg"].(string)
		if !strings.Contains(strings.ToLower(m), strings.ToLower(msg)) && !strings.Contains(strings.ToLower(line), strings.ToLower(msg)) {
			continue
		}
		if reqID != "" && !strings.Contains(line, reqID) {
			continue
		}
		n++
	}
	return n
}

// --- crash helpers ---

// newULID makes a ULID like the server's (48-bit ms time, 80 random bits,
// Crockford base32), for rows the tests insert themselves.
func newULID(t testing.TB) string {
	const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var raw [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 0; i < 6; i++ {
		raw[i] = byte(ms >> (40 - 8*i))
	}
	if _, err := rand.Read(raw[6:]); err != nil {
		t.Fatal(err)
	}
	v := new(big.Int).SetBytes(raw[:])
	out := make([]byte, 26)
	b32 := big.NewInt(32)
	for i := 25; i >= 0; i-- {
		m := new(big.Int)
		v.DivMod(v, b32, m)
		out[i] = crockford[m.Int64()]
	}
	return string(out)
}

// postUntilCrash sends a transfer whose adapter call kills the server and
// waits for the process to be gone. The answer, if any, is ignored (the
// kill may race the reply).
func (x *xt) postUntilCrash(user uint64, from, to, asset, amount string) {
	x.Helper()
	tok, s := x.tok(user), x.s
	go func() {
		_, _, _ = s.tryDo("POST", "/api/v1/internal_transfer", tok, xferBody(from, to, asset, amount))
	}()
	x.waitExit()
}

// waitExit waits for the server process to die (an injected crash).
func (x *xt) waitExit() {
	x.Helper()
	select {
	case <-x.s.exited:
	case <-time.After(30 * time.Second):
		x.Fatalf("the server did not crash within 30 s:\n%s", x.s.Logs())
	}
	if !strings.Contains(x.s.Logs(), "fault injection: killing the process") {
		x.Fatalf("the server died, but not by the injected crash:\n%s", x.s.Logs())
	}
}
