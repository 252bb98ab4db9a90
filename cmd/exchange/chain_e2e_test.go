package main

// A withdrawal end to end over HTTP against the real binary, Postgres and
// anvil: FUNDING deposit, POST /api/v1/withdrawals, TRACKING visible through
// the API before the final state, CONFIRMED -> COMPLETED with the value at
// the address on chain, the conservation check exact before, during and
// after, and the admin tx API (poll only, no confirmation counts).

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/pgtest"
)

func TestWithdrawalEndToEnd(t *testing.T) {
	node := anviltest.StartT(t)
	pg := pgtest.NewDB(t)
	key, hot := node.NewKey(t)
	keyFile := hotKeyFile(t, key)
	s := e2eStart(t, t.TempDir(), pg, "--chain-rpc", node.URL, "--chain-key-file", keyFile, "--chain-finality", "2",
		"--chain-resubmit-interval", "1s", "--invariant-interval", "0")
	if strings.Contains(s.Logs(), strings.TrimPrefix(key, "0x")) {
		t.Fatal("the private key appears in the logs")
	}
	x := newXT(t, s, pg)
	user := x.user()
	tok := x.tok(user)
	x.deposit(user, "ETH", "1")
	conserved := func(when string) {
		t.Helper()
		st, b := s.do("GET", "/admin/v1/invariants", x.admin, nil)
		if st != 200 || b["ok"] != true {
			t.Fatalf("conservation %s: %d %v", when, st, b)
		}
	}
	conserved("before")

	to := anviltest.Addr(0xe2e)
	if st, b := s.do("POST", "/api/v1/withdrawals", tok, map[string]any{"asset": "ETH", "amount": "0.25", "address": "0xnot"}); st != 400 || b["code"] != "INVALID_ADDRESS" {
		t.Fatalf("bad address: %d %v", st, b)
	}
	if err := node.Automine(false); err != nil {
		t.Fatal(err)
	}
	st, w := s.do("POST", "/api/v1/withdrawals", tok, map[string]any{"asset": "ETH", "amount": "0.25",
		"address": evm.Checksummed(to), "cid": "w1"})
	if st != 202 || w["state"] != "PENDING" || w["amount"] != "0.25000000" || w["value_wei"] != "250000000000000000" {
		t.Fatalf("withdraw: %d %v", st, w)
	}
	id := fmt.Sprint(w["withdrawal_id"])
	if st, dup := s.do("POST", "/api/v1/withdrawals", tok, map[string]any{"asset": "ETH", "amount": "0.25",
		"address": evm.Checksummed(to), "cid": "w1"}); st != 202 || dup["duplicate"] != true || fmt.Sprint(dup["withdrawal_id"]) != id {
		t.Fatalf("repeated cid: %d %v", st, dup)
	}
	if st, b := s.do("GET", "/api/v1/withdrawals/"+id, x.tok(x.user()), nil); st != 404 || b["code"] != "WITHDRAWAL_NOT_FOUND" {
		t.Fatalf("another user's withdrawal: %d %v", st, b)
	}
	poll := func(what string, pred func(map[string]any) bool) map[string]any {
		t.Helper()
		end := time.Now().Add(20 * time.Second)
		for {
			st, b := s.do("GET", "/api/v1/withdrawals/"+id, tok, nil)
			if st == 200 && pred(b) {
				return b
			}
			if time.Now().After(end) {
				t.Fatalf("withdrawal %s never %s: %d %v", id, what, st, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	w = poll("TRACKING", func(b map[string]any) bool { return b["tx_state"] == string(chaintx.Tracking) })
	if w["state"] != "PENDING" {
		t.Fatalf("tracking: %v", w)
	}
	conserved("in flight")
	if st, inv := s.do("GET", "/admin/v1/invariants", x.admin, nil); st != 200 || !strings.Contains(fmt.Sprint(inv["assets"]), "withdrawn:2.5e+07") {
		t.Fatalf("the withdrawn term does not show the 0.25 ETH in flight: %v", inv)
	}
	txID := fmt.Sprint(w["tx_id"])
	st, tx := s.do("GET", "/admin/v1/tx/"+txID, x.admin, nil)
	if st != 200 || tx["state"] != "TRACKING" || tx["request_id"] != "wd-"+id || tx["submitter"] != evm.Checksummed(hot) {
		t.Fatalf("admin tx: %d %v", st, tx)
	}
	for k := range tx {
		if strings.Contains(k, "confirmation") || strings.Contains(k, "block") {
			t.Fatalf("answer exposes %q", k)
		}
	}
	if err := node.Mine(3); err != nil {
		t.Fatal(err)
	}
	w = poll("COMPLETED", func(b map[string]any) bool { return b["state"] == "COMPLETED" })
	if w["tx_state"] != "CONFIRMED" {
		t.Fatalf("completed: %v", w)
	}
	bal, err := node.Balance(to)
	if err != nil || bal.Cmp(big.NewInt(250_000_000_000_000_000)) != 0 {
		t.Fatalf("on chain the address holds %v wei (%v)", bal, err)
	}
	conserved("after")
	if b := x.bal(user); b["ETH"].Funding != 75_000_000 { // 0.75 ETH at scale 8
		t.Fatalf("funding after: %+v", b["ETH"])
	}
	st, cs := s.do("GET", "/admin/v1/tx/completions?after=0&limit=10", x.admin, nil)
	list, _ := cs["completions"].([]any)
	if st != 200 || len(list) != 1 || list[0].(map[string]any)["status"] != "CONFIRMED" {
		t.Fatalf("completions: %d %v", st, cs)
	}
	st, h := s.do("GET", "/api/v1/withdrawals", tok, nil)
	if ws, _ := h["withdrawals"].([]any); st != 200 || len(ws) != 1 {
		t.Fatalf("history: %d %v", st, h)
	}
	st, byReq := s.do("GET", "/admin/v1/tx/by-request?submitter="+evm.Checksummed(hot)+"&request_id=wd-"+id, x.admin, nil)
	if st != 200 || fmt.Sprint(byReq["tx_id"]) != txID {
		t.Fatalf("by-request: %d %v", st, byReq)
	}
	st, metrics := s.doRaw("GET", "/metrics", "", nil)
	for _, name := range []string{"ubs_chain_lease_acquire_total", "ubs_chain_tx_create_total", "ubs_chain_tx_submit_total",
		"ubs_chain_receipt_check_total", "ubs_chain_pending_oldest_age_seconds", "ubs_chain_writer_queue_depth"} {
		if st != 200 || !strings.Contains(string(metrics), name) {
			t.Fatalf("/metrics lacks %s", name)
		}
	}
}

// TestE2EReadyWaitsForChainManager (issue 41 defect 5): with the chain side
// on, /health/ready is 200 only once the manager has started, so the first
// POST /admin/v1/tx after ready is served (before, 1 start in 4 answered
// 503 "manager stopped"). The manager's start is held here: its first lease
// round waits on a row lock the test holds (a slow database), long after
// the migrations ran.
func TestE2EReadyWaitsForChainManager(t *testing.T) {
	node := anviltest.StartT(t)
	pg := pgtest.NewDB(t)
	key, hot := node.NewKey(t)
	keyFile := hotKeyFile(t, key)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := persist.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `INSERT INTO submitter_lease (submitter, owner_node, fencing_token, expires_at)
		VALUES ($1, 'gone', 1, now() - interval '1 hour')`, string(hot)); err != nil {
		t.Fatal(err)
	}
	s := e2eLaunch(t, t.TempDir(), pg, "--chain-rpc", node.URL, "--chain-key-file", keyFile, "--chain-finality", "1",
		"--invariant-interval", "0")
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(s.Logs(), "migrations applied") {
		if time.Now().After(deadline) {
			t.Fatalf("never migrated:\n%s", s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 20 { // migrated, serving, the manager not started
		if s.ready() {
			t.Fatal("/health/ready is 200 while the chain manager has not started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	s.waitReady(30 * time.Second)
	admin := s.token(1000, true)
	st, b := s.do("POST", "/admin/v1/tx", admin, map[string]any{"to": evm.Checksummed(anviltest.Addr(0x5)), "value": "1"})
	if st != 201 || b["state"] != "ALLOCATED" {
		t.Fatalf("the first tx after ready: %d %v", st, b)
	}
	s.Stop()
}

// TestE2ETxCreateHungNodeUnknown (issue 41 defect 3): POST /admin/v1/tx
// without a request_id gets one assigned (stored, answered, findable by
// GET). With the chain node hung, the writer cannot finish in time: the
// answer is 202 UNKNOWN with the request_id (before: 500 "internal
// failure; retry later", and the tx was sent anyway once the node answered).
// After the node recovers the tx is found by that request_id, a retry with
// it answers the same tx, and the value moved once.
func TestE2ETxCreateHungNodeUnknown(t *testing.T) {
	node := anviltest.StartT(t)
	pg := pgtest.NewDB(t)
	key, hot := node.NewKey(t)
	keyFile := hotKeyFile(t, key)
	proxy := anviltest.NewHangProxy(t, node.URL)
	s := e2eStart(t, t.TempDir(), pg, "--chain-rpc", proxy.URL(), "--chain-key-file", keyFile, "--chain-finality", "1",
		"--chain-resubmit-interval", "1s", "--chain-create-timeout", "1s", "--invariant-interval", "0")
	admin := s.token(1000, true)
	byReq := func(req string) (int, map[string]any) {
		return s.do("GET", "/admin/v1/tx/by-request?submitter="+evm.Checksummed(hot)+"&request_id="+req, admin, nil)
	}

	to1, to2 := anviltest.Addr(0x4131), anviltest.Addr(0x4132)
	st, tx := s.do("POST", "/admin/v1/tx", admin, map[string]any{"to": evm.Checksummed(to1), "value": "11"})
	req1, _ := tx["request_id"].(string)
	if st != 201 || !strings.HasPrefix(req1, "auto-") || len(req1) != len("auto-")+32 {
		t.Fatalf("created without request_id: %d %v (want a server-assigned request_id)", st, tx)
	}
	if st, got := byReq(req1); st != 200 || fmt.Sprint(got["tx_id"]) != fmt.Sprint(tx["tx_id"]) {
		t.Fatalf("by its assigned request_id: %d %v", st, got)
	}
	if st, again := s.do("POST", "/admin/v1/tx", admin, map[string]any{"to": evm.Checksummed(to1), "value": "11"}); st != 201 ||
		again["request_id"] == req1 || fmt.Sprint(again["tx_id"]) == fmt.Sprint(tx["tx_id"]) {
		t.Fatalf("a second call without request_id is a new tx with its own id: %d %v", st, again)
	}

	proxy.Hang()
	start := time.Now()
	st, u := s.do("POST", "/admin/v1/tx", admin, map[string]any{"to": evm.Checksummed(to2), "value": "22"})
	req2, _ := u["request_id"].(string)
	if st != 202 || u["state"] != "UNKNOWN" || !strings.HasPrefix(req2, "auto-") || u["submitter"] != evm.Checksummed(hot) {
		t.Fatalf("creation with the node hung: %d %v (want 202 UNKNOWN with the request_id)", st, u)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("answered after %v (--chain-create-timeout 1s)", d)
	}
	if st, b := byReq(req2); st != 404 || b["code"] != "TX_NOT_FOUND" {
		t.Fatalf("by request while the node hangs: %d %v", st, b)
	}

	proxy.Recover()
	var got map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, got = byReq(req2)
		if st == 200 && got["state"] == "CONFIRMED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the UNKNOWN tx never confirmed: %d %v", st, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	st, dup := s.do("POST", "/admin/v1/tx", admin, map[string]any{"to": evm.Checksummed(to2), "value": "22", "request_id": req2})
	if st != 200 || dup["duplicate"] != true || fmt.Sprint(dup["tx_id"]) != fmt.Sprint(got["tx_id"]) {
		t.Fatalf("retry with the assigned request_id: %d %v (want the same tx, duplicate)", st, dup)
	}
	if bal, err := node.Balance(to2); err != nil || bal.Cmp(big.NewInt(22)) != 0 {
		t.Fatalf("on chain the recipient holds %v wei (%v), want 22 (once)", bal, err)
	}
	s.Stop()
}

// TestE2EWithdrawalEmptyWalletRefundedOnce (issue 41 defect 1, end to end):
// the hot wallet is emptied after the balance check's reading, so the node refuses the withdrawal's tx and the
// hook's CANCEL; the tx goes ALLOCATED -> STUCK and the withdrawal stays
// PENDING. Once the wallet is refilled the CANCEL is resent and mined: the
// tx becomes FAILED_FINAL CANCELLED and the withdrawal CANCELLED, refunded
// to FUNDING exactly once, nothing at the address, conservation exact.
func TestE2EWithdrawalEmptyWalletRefundedOnce(t *testing.T) {
	node := anviltest.StartT(t)
	pg := pgtest.NewDB(t)
	key, hot := node.NewKey(t)
	keyFile := hotKeyFile(t, key)
	// The wallet is emptied after the hot wallet check's reading (taken
	// before readiness; the next one an hour later), so the withdrawal is
	// accepted and its broadcast refused: the window that check cannot
	// close (issue 33 item 3).
	s := e2eStart(t, t.TempDir(), pg, "--chain-rpc", node.URL, "--chain-key-file", keyFile, "--chain-finality", "1",
		"--chain-resubmit-interval", "1s", "--chain-stuck-after", "500ms", "--chain-stuck-action", "CANCEL", "--invariant-interval", "0",
		"--chain-balance-interval", "1h")
	if err := node.SetBalance(hot, new(big.Int)); err != nil {
		t.Fatal(err)
	}
	x := newXT(t, s, pg)
	user := x.user()
	tok := x.tok(user)
	x.deposit(user, "ETH", "1")
	to := anviltest.Addr(0xe41)
	st, w := s.do("POST", "/api/v1/withdrawals", tok, map[string]any{"asset": "ETH", "amount": "0.5", "address": evm.Checksummed(to)})
	if st != 202 || w["state"] != "PENDING" {
		t.Fatalf("withdraw: %d %v", st, w)
	}
	id := fmt.Sprint(w["withdrawal_id"])
	poll := func(what string, within time.Duration, path, tok string, pred func(map[string]any) bool) map[string]any {
		t.Helper()
		end := time.Now().Add(within)
		for {
			st, b := s.do("GET", path, tok, nil)
			if st == 200 && pred(b) {
				return b
			}
			if time.Now().After(end) {
				t.Fatalf("%s never %s: %d %v", path, what, st, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	w = poll("STUCK", 10*time.Second, "/api/v1/withdrawals/"+id, tok, func(b map[string]any) bool { return b["tx_state"] == "STUCK" })
	txPath := "/admin/v1/tx/" + fmt.Sprint(w["tx_id"])
	poll("with a CANCEL signed", 5*time.Second, txPath, x.admin, func(b map[string]any) bool {
		return strings.Contains(fmt.Sprint(b["signed"]), "CANCEL")
	})
	time.Sleep(200 * time.Millisecond) // the CANCEL's own broadcast is refused too
	if w := poll("PENDING", time.Second, "/api/v1/withdrawals/"+id, tok, func(map[string]any) bool { return true }); w["state"] != "PENDING" {
		t.Fatalf("before the refill: %v", w)
	}

	wei, _ := new(big.Int).SetString("10000000000000000000", 10)
	if err := node.SetBalance(hot, wei); err != nil {
		t.Fatal(err)
	}
	w = poll("CANCELLED", 20*time.Second, "/api/v1/withdrawals/"+id, tok, func(b map[string]any) bool { return b["state"] == "CANCELLED" })
	if w["tx_state"] != "FAILED_FINAL" {
		t.Fatalf("refunded: %v", w)
	}
	time.Sleep(500 * time.Millisecond) // the settler's later passes refund nothing more
	if b := x.bal(user); b["ETH"].Funding != 100_000_000 {
		t.Fatalf("funding after the refund: %+v, want 1 ETH (refunded once)", b["ETH"])
	}
	if bal, err := node.Balance(to); err != nil || bal.Sign() != 0 {
		t.Fatalf("the address holds %v wei (%v), want none", bal, err)
	}
	if st, inv := s.do("GET", "/admin/v1/invariants", x.admin, nil); st != 200 || inv["ok"] != true {
		t.Fatalf("conservation: %d %v", st, inv)
	}
	s.Stop()
}

// hotKeyFile writes the hot wallet's hex private key where --chain-key-file
// reads it (a file of the test's, mode 0600) and returns its path.
func hotKeyFile(t *testing.T, key string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hot.key")
	if err := os.WriteFile(path, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
