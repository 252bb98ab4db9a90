package main

// Restarts with binary markets against the real binary (issue 40, defect 1):
// one venue holds binary markets in every state a restart can meet — DRAFT,
// ACTIVE with resting orders (one partly filled), HALTED with a resting
// order, RESOLVED part-way through its settlement, SETTLED — beside a spot
// order; it is stopped by SIGINT, SIGTERM and SIGKILL in turn, and after
// each start it is ready and answers every question the clients asked
// before (markets, books, orders, positions, balances, fees) the same way.
// Then the markets still work: the half-settled one settles, a resting
// order cancels; and a config putting a spot market on a binary market's
// id is refused by name.

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ubscore/ubscore/instruments"
	"github.com/ubscore/ubscore/persist/pgtest"
)

// stopWith sends sig (SIGINT or SIGTERM: a graceful stop) and waits for exit 0.
func (s *e2eServer) stopWith(sig os.Signal) {
	s.t.Helper()
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		s.t.Fatalf("server did not stop within 60 s of %v:\n%s", sig, s.Logs())
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		s.t.Fatalf("server exited with %d after %v:\n%s", code, sig, s.Logs())
	}
}

// The binary markets of TestRestartWithBinaryMarkets, one per state.
const (
	rbDraft    = 41
	rbActive   = 42
	rbHalted   = 43
	rbSettling = 44 // RESOLVED, settlement not finished
	rbSettled  = 45
)

func TestRestartWithBinaryMarkets(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewDB(t)
	dir := t.TempDir()
	s := e2eStart(t, dir, pg)
	users := []uint64{31, 32, 33}
	for _, u := range users {
		if st, out := s.do("POST", "/admin/v1/adjust", s.token(1000, true), map[string]any{"user_id": u, "asset": "USDT",
			"amount": "1000", "ref": fmt.Sprint("rb-fund-", u)}); st != 200 {
			t.Fatalf("fund %d: %d %v", u, st, out)
		}
	}
	ok := func(method, path string, user uint64, body any) map[string]any {
		t.Helper()
		st, out := s.do(method, path, s.token(user, user == 1000), body)
		if st != 200 {
			t.Fatalf("%s %s %v: %d %v\n%s", method, path, body, st, out, s.Logs())
		}
		return out
	}
	owner := map[uint64]uint64{} // every order id the clients were given -> its user
	order := func(u uint64, m int, outcome, side, price string, qty int) map[string]any {
		t.Helper()
		o := ok("POST", "/api/v1/order", u, map[string]any{"market": fmt.Sprint(m), "outcome": outcome, "side": side,
			"type": "LIMIT", "price": price, "quantity": fmt.Sprint(qty)})
		owner[uint64(o["order_id"].(float64))] = u
		return o
	}
	admin := func(m int, action string, body any) map[string]any {
		t.Helper()
		return ok("POST", fmt.Sprintf("/admin/v1/binary-markets/%d/%s", m, action), 1000, body)
	}
	for m := rbDraft; m <= rbSettled; m++ {
		ok("POST", "/admin/v1/binary-markets", 1000, map[string]any{"market_id": m, "quote": "USDT",
			"taker_fee_ppm": 2000, "question": fmt.Sprintf("Restart question %d?", m)})
		if m != rbDraft {
			admin(m, "activate", nil)
		}
	}
	// ACTIVE: a partly filled BUY YES and a BUY NO rest.
	order(31, rbActive, "YES", "BUY", "0.60", 100)
	order(32, rbActive, "NO", "BUY", "0.40", 30) // mints 30
	order(32, rbActive, "NO", "BUY", "0.30", 20)
	// To be HALTED: positions and a resting order.
	order(31, rbHalted, "YES", "BUY", "0.55", 10)
	order(33, rbHalted, "NO", "BUY", "0.45", 10)
	order(33, rbHalted, "NO", "BUY", "0.20", 5)
	// RESOLVED part-way: three positions, one settled by a slice of 1.
	order(31, rbSettling, "YES", "BUY", "0.50", 20)
	order(32, rbSettling, "NO", "BUY", "0.50", 10)
	order(33, rbSettling, "NO", "BUY", "0.50", 10)
	order(31, rbSettling, "YES", "BUY", "0.10", 5) // cancelled by the resolve
	admin(rbSettling, "resolve", map[string]any{"outcome": "YES"})
	if v := admin(rbSettling, "settle", map[string]any{"limit": 1}); v["status"] != "RESOLVED" || v["settling"] != true {
		t.Fatalf("after one settle slice: %v", v)
	}
	// SETTLED.
	order(32, rbSettled, "YES", "BUY", "0.70", 10)
	order(33, rbSettled, "NO", "BUY", "0.30", 10)
	admin(rbSettled, "resolve", map[string]any{"outcome": "NO"})
	if v := admin(rbSettled, "settle", nil); v["status"] != "SETTLED" {
		t.Fatalf("settled: %v", v)
	}
	// And a spot order beside them.
	spot := ok("POST", "/api/v1/order", 31, map[string]any{"market": "BTC-USDT", "side": "BUY", "type": "LIMIT",
		"price": "50000", "quantity": "0.001"})
	owner[uint64(spot["order_id"].(float64))] = 31

	// The operator halts the binary market by its id (issue 40, defect 3).
	if h := ok("POST", fmt.Sprintf("/admin/v1/markets/%d/halt", rbHalted), 1000, nil); h["status"] != "HALTED" {
		t.Fatalf("halt %d: %v", rbHalted, h)
	}
	// The first stop is SIGINT.
	want := rbSnapshot(s, users, owner)
	s.stopWith(syscall.SIGINT)
	if v := want[fmt.Sprint("market ", rbHalted)].(map[string]any); v["halt_reason"] != "MANUAL_HALT" {
		t.Fatalf("market %d before the restarts: %v, want halted by MANUAL_HALT", rbHalted, v)
	}
	for m, status := range map[int]string{rbDraft: "DRAFT", rbActive: "ACTIVE", rbHalted: "HALTED", rbSettling: "RESOLVED",
		rbSettled: "SETTLED"} {
		if v := want[fmt.Sprint("market ", m)].(map[string]any); v["status"] != status {
			t.Fatalf("market %d is %v before the restarts, want %s", m, v["status"], status)
		}
	}
	for m, sides := range map[int]int{rbActive: 2, rbHalted: 1} { // resting orders the restarts must keep
		if d := want[fmt.Sprintf("depth %d YES", m)].(map[string]any); len(d["bids"].([]any))+len(d["asks"].([]any)) != sides {
			t.Fatalf("market %d's book before the restarts: %v, want %d levels", m, d, sides)
		}
	}
	for i, stop := range []func(*e2eServer){
		func(s *e2eServer) { s.stopWith(syscall.SIGTERM) },
		func(s *e2eServer) { s.Kill() },
		nil,
	} {
		s = e2eStart(t, dir, pg)
		got := rbSnapshot(s, users, owner)
		rbCompare(t, fmt.Sprintf("start %d", i+2), want, got)
		if stop != nil {
			stop(s)
		}
	}
	// The markets work on: settlement finishes, a resting order cancels.
	if v := admin(rbSettling, "settle", nil); v["status"] != "SETTLED" || v["settling"] != false {
		t.Fatalf("settling after the restarts: %v", v)
	}
	cancelled := 0
	for id, u := range owner {
		if o := want[fmt.Sprint("order ", id)].(map[string]any); o["market"] == fmt.Sprint(rbActive) && o["status"] == "NEW" {
			if st, o := s.do("DELETE", fmt.Sprint("/api/v1/order/", id), s.token(u, false), nil); st != 200 || o["status"] != "CANCELLED" {
				t.Fatalf("cancel %d after the restarts: %d %v", id, st, o)
			}
			cancelled++
		}
	}
	if cancelled != 1 {
		t.Fatalf("%d resting NEW orders of market %d cancelled, want 1", cancelled, rbActive)
	}
	e2eWaitSink(t, s, pg) // the read model followed every restart
	s.Stop()

	// A config that puts a spot market on binary market 42's id: the start
	// is refused with the collision named, before anything is installed.
	cfg, err := os.ReadFile("../../instruments/testdata/default-config.json")
	if err != nil {
		t.Fatal(err)
	}
	var cf map[string]any
	if err := json.Unmarshal(cfg, &cf); err != nil {
		t.Fatal(err)
	}
	cf["markets"] = append(cf["markets"].([]any), map[string]any{"symbol": "ETH-BTC", "id": rbActive, "base": "ETH",
		"quote": "BTC", "tick": "0.00001", "lot": "0.001", "min_qty": "0.001", "max_qty": "1000", "maker_fee_ppm": 0,
		"taker_fee_ppm": 0})
	path := t.TempDir() + "/clash.json"
	if cfg, err = json.Marshal(cf); err != nil || os.WriteFile(path, cfg, 0o600) != nil {
		t.Fatal(err)
	}
	s = e2eLaunch(t, dir, pg, "--config", path)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("a spot market on a binary market's id: still running:\n%s", s.Logs())
	}
	if code, logs := s.cmd.ProcessState.ExitCode(), s.Logs(); code != 1 || !strings.Contains(logs, instruments.ErrBinaryCollision.Error()) ||
		!strings.Contains(logs, fmt.Sprintf(`spot market "ETH-BTC" has id %d, binary market %d (ACTIVE)`, rbActive, rbActive)) {
		t.Fatalf("a spot market on a binary market's id: exit %d:\n%s", code, logs)
	}
}

// rbSnapshot is every answer the clients can read about the venue, keyed
// by what was asked, each without its "seq" (the read's position, which
// moves with every command).
func rbSnapshot(s *e2eServer, users []uint64, owner map[uint64]uint64) map[string]any {
	s.t.Helper()
	out := map[string]any{}
	get := func(key, path string, user uint64) {
		s.t.Helper()
		st, v := s.do("GET", path, s.token(user, user == 1000), nil)
		if st != 200 {
			s.t.Fatalf("%s: %d %v", path, st, v)
		}
		delete(v, "seq")
		out[key] = v
	}
	for m := rbDraft; m <= rbSettled; m++ {
		get(fmt.Sprint("market ", m), fmt.Sprint("/api/v1/binary-markets/", m), 31)
		for _, o := range []string{"YES", "NO"} {
			get(fmt.Sprintf("depth %d %s", m, o), fmt.Sprintf("/api/v1/depth/%d?outcome=%s", m, o), 31)
		}
	}
	for _, u := range users {
		get(fmt.Sprint("positions ", u), "/api/v1/positions", u)
		get(fmt.Sprint("balances ", u), "/api/v1/balances", u)
		get(fmt.Sprint("open orders ", u), "/api/v1/orders", u)
	}
	for id, u := range owner {
		get(fmt.Sprint("order ", id), fmt.Sprint("/api/v1/order/", id), u)
	}
	get("fees", "/admin/v1/fees", 1000)
	get("spot depth", "/api/v1/depth/BTC-USDT", 31)
	return out
}

// rbCompare fails on every answer that differs from the one before the stop.
func rbCompare(t *testing.T, step string, want, got map[string]any) {
	t.Helper()
	for k, w := range want {
		wj, _ := json.Marshal(w)
		gj, _ := json.Marshal(got[k])
		if string(wj) != string(gj) {
			t.Errorf("%s: %s changed:\nbefore %s\nafter  %s", step, k, wj, gj)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}
