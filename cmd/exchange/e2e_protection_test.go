package main

// The fault-injection suite of spec 004 against the real binary, one story
// per injected fault (a drifted level total, frozen funds no order holds, a
// negative balance): the fault goes in through the sequence
// (--enable-fault-injection); the periodic full check (--core-check-
// interval) finds it and halts the market or the core with the right reason
// (a CRITICAL line, a circuit_breaker_events row in Postgres, health
// degraded, /health/ready still 200, the other market trading); the
// operator path (repairs by adjustment, the breaker resolution) lifts it and
// trading resumes. Between steps the server is SIGKILLed and restarted: it
// always starts, with the same halts in force. `make test` kills once per
// story (after the detection); `make test-long` after every step.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/pgtest"
)

// faultStory is one fault and how an operator resolves it.
type faultStory struct {
	name   string
	fault  map[string]any // POST /admin/v1/faults/core
	market string         // the halted market's symbol, "" for the core
	dbID   string         // circuit_breaker_events.market_id
	reason string
	repair []map[string]any // POST /admin/v1/adjust bodies (core stories)
}

var faultStories = []faultStory{
	{name: "level drift", market: "BTC-USDT", dbID: "1", reason: "ORDERBOOK_DESYNC",
		fault: map[string]any{"fault": "level_drift", "market": "BTC-USDT", "side": "SELL", "amount": "0.0003"}},
	{name: "stray frozen", dbID: "*", reason: "INVARIANT_BALANCE",
		fault: map[string]any{"fault": "stray_frozen", "user_id": 1, "asset": "USDT", "amount": "5"},
		repair: []map[string]any{
			{"user_id": 1, "asset": "USDT", "amount": "-5", "ref": "fix-frozen", "balance": "frozen"},
			{"user_id": 1, "asset": "USDT", "amount": "5", "ref": "fix-avail"}}},
	{name: "negative balance", dbID: "*", reason: "NEGATIVE_BALANCE",
		fault: map[string]any{"fault": "negative_balance", "user_id": 2, "asset": "BTC", "amount": "2"},
		repair: []map[string]any{
			{"user_id": 2, "asset": "BTC", "amount": "2", "ref": "fix-user"},
			{"user_id": 0, "asset": "BTC", "amount": "-2", "ref": "fix-fee"}}},
}

// storyRun drives one story on one data dir and database, restarting the
// server where asked.
type storyRun struct {
	t      *testing.T
	st     faultStory
	dir    string
	pg     string
	s      *e2eServer
	admin  string
	halted string // the reason of the halt in force ("" = none), as the story left it
}

const storyCheckInterval = "200ms"

func (r *storyRun) start() {
	r.s = e2eStart(r.t, r.dir, r.pg, "--enable-fault-injection", "--core-check-interval", storyCheckInterval,
		"--invariant-interval", "0")
	r.admin = r.s.token(1000, true)
}

// restart kills the server (SIGKILL) and starts it again on the same data
// dir: it must start, with the halt the story left in force.
func (r *storyRun) restart() {
	r.s.Kill()
	r.start()
	if r.halted == "" {
		r.wantTrading()
		return
	}
	r.wantHalted(r.halted, false)
	if v := r.s.metric(r.haltedMetric()); v != 1 {
		r.t.Fatalf("after a restart %s = %v: the metric is not read from the recovered state", r.haltedMetric(), v)
	}
}

func (r *storyRun) haltedMetric() string {
	if r.st.market == "" {
		return `ubs_markets{status="CORE_HALTED"}`
	}
	return `ubs_markets{status="HALTED"}`
}

func (r *storyRun) ok(method, path, token string, body any) map[string]any {
	r.t.Helper()
	st, out := r.s.do(method, path, token, body)
	if st != 200 {
		r.t.Fatalf("%s: %s %s: %d %v", r.st.name, method, path, st, out)
	}
	return out
}

func order(market, side, price, qty string) map[string]any {
	return map[string]any{"market": market, "side": side, "type": "LIMIT", "time_in_force": "GTC", "price": price, "quantity": qty}
}

// setup funds users 1 and 2 and rests orders in both markets.
func (r *storyRun) setup() {
	for _, f := range []map[string]any{
		{"user_id": 1, "asset": "USDT", "amount": "100000", "ref": "f1u"}, {"user_id": 1, "asset": "BTC", "amount": "10", "ref": "f1b"},
		{"user_id": 1, "asset": "ETH", "amount": "10", "ref": "f1e"}, {"user_id": 2, "asset": "USDT", "amount": "100000", "ref": "f2u"},
		{"user_id": 2, "asset": "BTC", "amount": "1", "ref": "f2b"},
	} {
		r.ok("POST", "/admin/v1/adjust", r.admin, f)
	}
	u1, u2 := r.s.token(1, false), r.s.token(2, false)
	r.ok("POST", "/api/v1/order", u1, order("BTC-USDT", "SELL", "50000", "0.001"))
	r.ok("POST", "/api/v1/order", u1, order("BTC-USDT", "SELL", "50100", "0.002"))
	r.ok("POST", "/api/v1/order", u2, order("BTC-USDT", "BUY", "49000", "0.001"))
	r.ok("POST", "/api/v1/order", u1, order("ETH-USDT", "SELL", "3000", "0.01"))
}

// wantHalted checks the halt in force: the market's (or the core's)
// reason, health degraded while /health/ready stays 200, orders refused
// there and, for a market halt, accepted in the other market. fresh: the
// halt was just found by this server, whose log must hold the CRITICAL line.
func (r *storyRun) wantHalted(reason string, fresh bool) {
	r.t.Helper()
	h := r.ok("GET", "/api/v1/health/matching", "", nil)
	if h["status"] != "degraded" || !r.s.ready() {
		r.t.Fatalf("%s: health %v, ready %v", r.st.name, h, r.s.ready())
	}
	cb := r.ok("GET", "/admin/v1/circuit-breaker", r.admin, nil)
	open, _ := cb["open"].([]any)
	if len(open) != 1 {
		r.t.Fatalf("%s: open breakers %v", r.st.name, cb)
	}
	o := open[0].(map[string]any)
	want := r.st.market
	if want == "" {
		want = "*"
	}
	if o["market_id"] != want || o["trigger_reason"] != reason {
		r.t.Fatalf("%s: open breaker %v, want %s %s", r.st.name, o, want, reason)
	}
	u1 := r.s.token(1, false)
	if r.st.market != "" {
		r.s.expect("order in the halted market", "POST", "/api/v1/order", u1, order("BTC-USDT", "SELL", "51000", "0.001"), 409, "MARKET_HALTED")
		r.ok("POST", "/api/v1/order", u1, order("ETH-USDT", "SELL", "3100", "0.001")) // the other market trades
	} else {
		r.s.expect("order while the core is halted", "POST", "/api/v1/order", u1, order("ETH-USDT", "SELL", "3100", "0.001"), 503, "CORE_HALTED")
		r.ok("GET", "/api/v1/balances", u1, nil) // reads are served
	}
	if fresh && (!strings.Contains(r.s.Logs(), "CRITICAL") || !strings.Contains(r.s.Logs(), reason)) {
		r.t.Fatalf("%s: no CRITICAL line naming %s:\n%s", r.st.name, reason, r.s.Logs())
	}
}

func (r *storyRun) wantTrading() {
	r.t.Helper()
	if h := r.ok("GET", "/api/v1/health/matching", "", nil); h["status"] != "healthy" {
		r.t.Fatalf("%s: health %v", r.st.name, h)
	}
	r.ok("POST", "/api/v1/order", r.s.token(1, false), order("BTC-USDT", "SELL", "52000", "0.001"))
}

// breakerRow waits until the sink has written the story's breaker row
// (open, or resolved) and returns reason, context, resolved_by, note.
func (r *storyRun) breakerRow(resolved bool) (string, string, string, string) {
	r.t.Helper()
	conn := e2eConn(r.t, r.pg)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var reason, ctxJSON string
		var by, note *string
		err := conn.QueryRow(context.Background(), `SELECT trigger_reason, context::text, resolved_by, resolution_note
			FROM circuit_breaker_events WHERE market_id = $1 AND (resolved_at IS NOT NULL) = $2
			ORDER BY trigger_seq DESC LIMIT 1`, r.st.dbID, resolved).Scan(&reason, &ctxJSON, &by, &note)
		if err == nil {
			deref := func(p *string) string {
				if p == nil {
					return ""
				}
				return *p
			}
			return reason, ctxJSON, deref(by), deref(note)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: no circuit_breaker_events row (resolved %v): %v", r.st.name, resolved, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// story runs the story; killAfter[k] restarts the server after step k
// (1 fault, 2 detected, 3 repaired, 4 resolved, 5 trading again).
func runStory(t *testing.T, st faultStory, killAfter map[int]bool) {
	r := &storyRun{t: t, st: st, dir: t.TempDir(), pg: pgtest.NewDB(t)}
	r.start()
	r.setup()

	r.ok("POST", "/admin/v1/faults/core", r.admin, st.fault) // 1
	if killAfter[1] {
		r.s.Kill() // before any check could run: the recovery finds the damage
		r.start()
	}

	// 2: found within the interval by the periodic check (or, after the kill
	// above, by the recovery's), halted with the reason, alerted, recorded.
	deadline := time.Now().Add(20 * time.Second)
	for {
		cb := r.ok("GET", "/admin/v1/circuit-breaker", r.admin, nil)
		if open, _ := cb["open"].([]any); len(open) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not halted within 20 s:\n%s", st.name, r.s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := st.reason
	if killAfter[1] {
		want = "RECOVERY_FAILED"
	}
	r.halted = want
	r.wantHalted(want, true)
	reason, ctxJSON, _, _ := r.breakerRow(false)
	phase := `"phase": "periodic"`
	if killAfter[1] {
		phase = `"phase": "recovery"`
	}
	if reason != want || !strings.Contains(ctxJSON, phase) {
		t.Fatalf("%s: breaker row %s %s, want %s in %s", st.name, reason, ctxJSON, want, phase)
	}
	if v := r.s.metric(fmt.Sprintf(`ubs_circuit_breaker_triggered_total{reason=%q}`, want)); v != 1 {
		t.Fatalf("%s: trips counted %v", st.name, v)
	}
	if v := r.s.metric("ubs_invariant_violations_total"); !killAfter[1] && v < 1 {
		t.Fatalf("%s: violations counted %v", st.name, v)
	}
	if killAfter[2] {
		r.restart()
	}

	// 3: repairs (core stories): the resolution is refused until they are in.
	if st.market == "" {
		r.s.expect("resolve before the repair", "POST", "/admin/v1/core/breaker/resolve", r.admin,
			map[string]any{"note": "too early"}, 409, "INVARIANT_VIOLATION")
		for _, fix := range st.repair {
			r.ok("POST", "/admin/v1/adjust", r.admin, fix)
		}
		if killAfter[3] {
			r.restart()
		}
	} else {
		r.s.expect("resolve without clearing the book", "POST", "/admin/v1/markets/BTC-USDT/breaker/resolve", r.admin,
			map[string]any{"target_status": "ACTIVE"}, 409, "INVARIANT_VIOLATION")
	}

	// 4: the operator's resolution.
	note := "fault-injection suite: " + st.name
	if st.market == "" {
		r.ok("POST", "/admin/v1/core/breaker/resolve", r.admin, map[string]any{"note": note})
	} else {
		out := r.ok("POST", "/admin/v1/markets/BTC-USDT/breaker/resolve", r.admin,
			map[string]any{"target_status": "ACTIVE", "note": note, "cancel_all": true})
		if out["cancelled_orders"] != 3.0 {
			t.Fatalf("%s: resolution %v", st.name, out)
		}
	}
	r.halted = ""
	if _, _, by, gotNote := r.breakerRow(true); by != "1000" || gotNote != note {
		t.Fatalf("%s: resolved row by %q note %q", st.name, by, gotNote)
	}
	if killAfter[4] {
		r.restart()
	}

	// 5: trading resumes.
	r.wantTrading()
	if killAfter[5] {
		r.restart()
	}
	r.s.Stop()
}

// TestSpec5_FaultInjectionStories: each story once, killed and restarted
// once, right after the halt (make test). -short keeps the one kill;
// without it (make test-long) TestSpec5_FaultInjectionKillEveryStep adds
// the others.
func TestSpec5_FaultInjectionStories(t *testing.T) {
	for _, st := range faultStories {
		t.Run(strings.ReplaceAll(st.name, " ", "_"), func(t *testing.T) {
			runStory(t, st, map[int]bool{2: true})
		})
	}
}

// TestSpec5_FaultInjectionKillEveryStep: a SIGKILL and a restart after
// every step of every story, the first one before any periodic check (the
// recovery itself must find the damage and start it halted).
func TestSpec5_FaultInjectionKillEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("make test-long: one kill per story runs in make test")
	}
	for _, st := range faultStories {
		t.Run(strings.ReplaceAll(st.name, " ", "_"), func(t *testing.T) {
			runStory(t, st, map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true})
		})
	}
}

// TestSpec2_CorruptSnapshotRestart: the real binary, stopped with its
// snapshot written, restarts after one byte of the newest snapshot is
// flipped: it recovers from the previous base (the reason logged) with the
// same balances and orders. Then §7: the metrics of the restarted server
// come from the recovered state (books, markets per status, recovery time
// and count, evictions, every breaker reason at 0, the check's histogram
// after one check) and /api/v1/health/matching is public.
func TestSpec2_CorruptSnapshotRestart(t *testing.T) {
	r := &storyRun{t: t, st: faultStories[0], dir: t.TempDir()}
	r.start()
	r.setup()
	before := balances(t, r.s, 1)
	r.s.Stop()
	snaps, err := filepath.Glob(filepath.Join(r.dir, "snapshots", "snapshot-*.snap"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("snapshots %v %v", snaps, err)
	}
	newest := snaps[len(snaps)-1]
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3] ^= 0x40
	if err := os.WriteFile(newest, b, 0o640); err != nil {
		t.Fatal(err)
	}
	r.start()
	if !strings.Contains(r.s.Logs(), "not used as the recovery base") || !strings.Contains(r.s.Logs(), "checksum") {
		t.Fatalf("no reason logged:\n%s", r.s.Logs())
	}
	if after := balances(t, r.s, 1); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("balances %v, before the restart %v", after, before)
	}
	h := r.ok("GET", "/api/v1/health/matching", "", nil)
	m := h["markets"].(map[string]any)["BTC-USDT"].(map[string]any)
	if h["status"] != "healthy" || m["order_count"] != 3.0 || m["orderbook_loaded"] != true {
		t.Fatalf("health %v", h)
	}
	for name, want := range map[string]float64{
		`ubs_book_orders{market="BTC-USDT"}`: 3, `ubs_book_orders{market="ETH-USDT"}`: 1,
		`ubs_markets{status="ACTIVE"}`: 2, `ubs_markets{status="HALTED"}`: 0, `ubs_markets{status="CORE_HALTED"}`: 0,
		`ubs_recoveries_total`: 1, `ubs_evictions_total`: 0, `ubs_markets_halted`: 0,
		`ubs_circuit_breaker_triggered_total{reason="INVARIANT_SHARES"}`: 0,
	} {
		if got := r.s.metric(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if r.s.metric(`ubs_recovery_seconds{market="all"}`) <= 0 {
		t.Error("no recovery time")
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.s.metric("ubs_invariant_check_seconds_count") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the periodic check never ran")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.s.Stop()
}
