package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/pgtest"
)

// TestE2EReadyWaitsForPostgres (issue 20): /health/ready turns 200 only
// once every enabled feature works — with Postgres, once its migrations ran,
// so the transfer service and FUNDING balances answer at once; before that
// it is 503 while /health/live is 200. A later Postgres outage shows in
// /health as "degraded" with the reason and never drops readiness, and
// trading goes on through it.
func TestE2EReadyWaitsForPostgres(t *testing.T) {
	t.Parallel() // waits on servers and Postgres more than it computes
	proxy := pgtest.NewProxy(t, pgtest.NewDB(t))
	proxy.Down()
	s := e2eLaunch(t, t.TempDir(), proxy.URL())
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, _, err := s.tryDo("GET", "/health/live", "", nil); err == nil && st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never live:\n%s", s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 10 { // Postgres unreachable: live, not ready, degraded
		if s.ready() {
			t.Fatal("/health/ready is 200 while Postgres was never reached (the transfer service cannot work)")
		}
		st, h := s.do("GET", "/health", "", nil)
		if st != 503 || h["ready"] != false || !strings.Contains(fmt.Sprint(h["degraded"]), "postgres") {
			t.Fatalf("health before Postgres: %d %v", st, h)
		}
		time.Sleep(50 * time.Millisecond)
	}

	proxy.Up()
	s.waitReady(30 * time.Second)
	user, admin := s.token(7, false), s.token(1000, true)
	// The first requests after ready work (no 503 "not ready", no funding: null).
	if st, b := s.do("GET", "/api/v1/internal_transfers", user, nil); st != 200 {
		t.Fatalf("transfers right after ready: %d %v", st, b)
	}
	if st, b := s.do("GET", "/api/v1/balances", user, nil); st != 200 || b["funding_error"] != nil {
		t.Fatalf("balances right after ready: %d %v", st, b)
	}
	if st, b := s.do("POST", "/admin/v1/deposit", admin, map[string]any{"user_id": 7, "asset": "USDT",
		"amount": "100", "tx_ref": "ready-1"}); st != 200 {
		t.Fatalf("deposit right after ready: %d %v", st, b)
	}

	// An outage later: degraded, still ready, still trading.
	proxy.Down()
	waitHealth := func(want string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, h := s.do("GET", "/health", "", nil)
			if !s.ready() {
				t.Fatal("readiness dropped during a Postgres outage")
			}
			if st == 200 && h["status"] == want {
				return h
			}
			if time.Now().After(deadline) {
				t.Fatalf("health never %s: %d %v", want, st, h)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if h := waitHealth("degraded"); !strings.Contains(fmt.Sprint(h["degraded"]), "postgres") {
		t.Fatalf("degraded without the reason: %v", h)
	}
	if st, b := s.do("POST", "/admin/v1/adjust", admin, map[string]any{"user_id": 7, "asset": "USDT", "amount": "1000",
		"ref": "ready-adj"}); st != 200 {
		t.Fatalf("adjust during the outage: %d %v", st, b)
	}
	if st, b := s.do("POST", "/api/v1/order", user, map[string]any{"market": "BTC-USDT", "side": "BUY", "type": "LIMIT",
		"price": "100", "quantity": "1"}); st != 200 {
		t.Fatalf("order during the outage: %d %v", st, b)
	}
	proxy.Up()
	waitHealth("healthy")
	s.Stop()
}
