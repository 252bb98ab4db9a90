package main

// Crash and outage tests of the real binary: kill -9 under HTTP load, and a
// Postgres outage under load. After each, every acknowledged order is back
// with its state, and the Postgres tables converge to the WAL.

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist/pgtest"
)

// ackedOrder is what a client was told about an order.
type ackedOrder struct {
	user   uint64
	status string
	filled int64 // base units
}

// e2eLoad runs clients placing (and sometimes cancelling) orders of users
// 1..users until stop is closed or the server stops answering, and returns
// every order acknowledged with a 200.
func e2eLoad(t *testing.T, s *e2eServer, clients, users int, stop <-chan struct{}) map[uint64]ackedOrder {
	var mu sync.Mutex
	acked := map[uint64]ackedOrder{}
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 7))
			tokens := map[uint64]string{}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				u := uint64(1 + r.IntN(users))
				tok, ok := tokens[u]
				if !ok {
					tok = s.token(u, false)
					tokens[u] = tok
				}
				side := "BUY"
				if r.IntN(2) == 0 {
					side = "SELL"
				}
				price := fmt.Sprintf("%d.%02d", 49990+r.IntN(20), r.IntN(100))
				tif := "GTC"
				if r.IntN(5) == 0 {
					tif = "IOC"
				}
				body := map[string]any{"market": "BTC-USDT", "side": side, "type": "LIMIT", "time_in_force": tif,
					"price": price, "quantity": fmt.Sprintf("0.%04d", 1+r.IntN(50))}
				st, resp, err := s.tryDo("POST", "/api/v1/order", tok, body)
				if err != nil {
					return // the server is gone
				}
				if st != 200 {
					continue
				}
				oid, a, err := parseAck(u, resp)
				if err != nil {
					t.Errorf("order answer %v: %v", resp, err) // Errorf: this is not the test goroutine
					return
				}
				mu.Lock()
				acked[oid] = a
				mu.Unlock()
				if i%7 == 0 && resp["status"] == "NEW" {
					st, resp, err := s.tryDo("DELETE", fmt.Sprintf("/api/v1/order/%d", oid), tok, nil)
					if err != nil {
						return
					}
					if st == 200 {
						_, a, err := parseAck(u, resp)
						if err != nil {
							t.Errorf("cancel answer %v: %v", resp, err)
							return
						}
						mu.Lock()
						acked[oid] = a
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	return acked
}

// parseAck reads an order answer without failing the test (load clients
// run off the test goroutine): order id, status and filled base units.
func parseAck(user uint64, resp map[string]any) (uint64, ackedOrder, error) {
	idf, ok1 := resp["order_id"].(float64)
	status, ok2 := resp["status"].(string)
	filled, ok3 := resp["filled_quantity"].(string)
	r, ok4 := new(big.Rat).SetString(filled)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return 0, ackedOrder{}, fmt.Errorf("malformed order answer")
	}
	r.Mul(r, big.NewRat(1_0000_0000, 1))
	if !r.IsInt() {
		return 0, ackedOrder{}, fmt.Errorf("filled_quantity %q has more than 8 decimals", filled)
	}
	return uint64(idf), ackedOrder{user: user, status: status, filled: r.Num().Int64()}, nil
}

// e2eFund gives users 1..n plenty of BTC and USDT.
func e2eFund(t *testing.T, s *e2eServer, n int) {
	admin := s.token(1000, true)
	for u := 1; u <= n; u++ {
		for _, a := range [][2]string{{"BTC", "1000"}, {"USDT", "100000000"}} {
			st, b := s.do("POST", "/admin/v1/adjust", admin, map[string]any{"user_id": u, "asset": a[0], "amount": a[1], "ref": fmt.Sprintf("fund-%d-%s", u, a[0])})
			if st != 200 {
				t.Fatalf("fund: %d %v", st, b)
			}
		}
	}
}

// e2eCheckAcked requires every acknowledged order to be present with its
// acknowledged state (or, if it was still open, a later state of it).
func e2eCheckAcked(t *testing.T, s *e2eServer, acked map[uint64]ackedOrder) {
	t.Helper()
	terminal := map[string]bool{"FILLED": true, "CANCELLED": true, "EXPIRED": true, "REJECTED": true}
	tokens := map[uint64]string{}
	for oid, a := range acked {
		tok, ok := tokens[a.user]
		if !ok {
			tok = s.token(a.user, false)
			tokens[a.user] = tok
		}
		st, o := s.do("GET", fmt.Sprintf("/api/v1/order/%d", oid), tok, nil)
		if st != 200 {
			t.Fatalf("acknowledged order %d (%+v) missing after restart: %d %v", oid, a, st, o)
		}
		got, filled := o["status"].(string), dec(t, o["filled_quantity"], 8)
		if terminal[a.status] {
			if got != a.status || filled != a.filled {
				t.Fatalf("order %d: acknowledged %s filled %d, after restart %s filled %d", oid, a.status, a.filled, got, filled)
			}
		} else if filled < a.filled {
			t.Fatalf("order %d: filled went back from %d to %d", oid, a.filled, filled)
		}
	}
}

// e2eConverged stops nothing: it requires (with the server stopped) that the
// Postgres tables equal what the WAL derives: trade count and volume, and
// every user's balances as sums of spot_ledger.
func e2eConverged(t *testing.T, dataDir, pg string) {
	t.Helper()
	var trades, volume, trips, resolved int64
	open := map[core.MarketID]bool{} // breaker trips not resolved yet (0: the core)
	var brk []core.BreakerChange
	rec, err := journal.Recover(journal.RecoverConfig{Dir: dataDir, ReadOnly: true, IgnoreSnapshots: true,
		Core: core.Config{AllowFaults: true}, // as the server that wrote a WAL with injected faults applied them
		OnCommand: func(c *core.Command, evs []core.Event) {
			for i := range evs {
				if evs[i].Kind == core.EvTrade {
					trades++
					volume += int64(evs[i].Qty)
				}
			}
			for _, b := range core.BreakerChanges(c, evs, brk[:0]) {
				switch {
				case !b.Resolve:
					trips++
					open[b.Market] = true
				case open[b.Market]: // a resume from SUSPENDED resolves no trip
					resolved++
					delete(open, b.Market)
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.WAL.Close()
	ctx := context.Background()
	conn := e2eConn(t, pg)
	var persisted, n, v int64
	if err := conn.QueryRow(ctx, "SELECT persisted_seq FROM core_checkpoint WHERE id=1").Scan(&persisted); err != nil {
		t.Fatal(err)
	}
	if core.Seq(persisted) != rec.Proc.LastSeq() {
		t.Fatalf("checkpoint %d, WAL last seq %d", persisted, rec.Proc.LastSeq())
	}
	if err := conn.QueryRow(ctx, "SELECT count(*), coalesce(sum(quantity),0) FROM trades").Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != trades || v != volume {
		t.Fatalf("trades: postgres %d rows / volume %d, WAL %d / %d", n, v, trades, volume)
	}
	rows, err := conn.Query(ctx, "SELECT user_id, asset_id, sum(d_available), sum(d_frozen) FROM spot_ledger GROUP BY 1, 2")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var u, a, av, fr int64
		if err := rows.Scan(&u, &a, &av, &fr); err != nil {
			t.Fatal(err)
		}
		b := rec.Proc.BalanceOf(core.UserID(u), core.AssetID(a))
		if int64(b.Avail) != av || int64(b.Frozen) != fr {
			t.Fatalf("user %d asset %d: spot_ledger sums %d/%d, core %d/%d", u, a, av, fr, b.Avail, b.Frozen)
		}
		seen++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("spot_ledger is empty")
	}
	// circuit_breaker_events: a row per trip, resolved by its resolution
	var rowsN, resolvedN int64
	if err := conn.QueryRow(ctx, "SELECT count(*), count(resolved_at) FROM circuit_breaker_events").Scan(&rowsN, &resolvedN); err != nil {
		t.Fatal(err)
	}
	if rowsN != trips || resolvedN != resolved {
		t.Fatalf("circuit_breaker_events: postgres %d trips / %d resolved, WAL %d / %d", rowsN, resolvedN, trips, resolved)
	}
	var dupes int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM (SELECT trade_id FROM trades GROUP BY 1 HAVING count(*) > 1) d").Scan(&dupes); err != nil {
		t.Fatal(err)
	}
	if dupes != 0 {
		t.Fatalf("%d trades doubled", dupes)
	}
}

func TestE2EKillUnderLoad(t *testing.T) {
	pg := pgtest.NewDB(t)
	dir := t.TempDir()
	s := e2eStart(t, dir, pg)
	e2eFund(t, s, 20)
	stop := make(chan struct{})
	var acked map[uint64]ackedOrder
	done := make(chan struct{})
	go func() { acked = e2eLoad(t, s, 8, 20, stop); close(done) }()
	time.Sleep(1500 * time.Millisecond)
	s.Kill() // SIGKILL mid-load
	close(stop)
	<-done
	if len(acked) < 50 {
		t.Fatalf("only %d orders acknowledged before the kill", len(acked))
	}
	t.Logf("%d orders acknowledged before kill -9", len(acked))
	s2 := e2eStart(t, dir, pg)
	e2eCheckAcked(t, s2, acked)
	e2eWaitSink(t, s2, pg)
	s2.Stop()
	e2eConverged(t, dir, pg)
}

// TestE2EPostgresOutage: Postgres goes away under load (every connection
// cut mid-statement, new ones refused: pgtest.Proxy) for 10 s (3 s with
// -short) and comes back. The API keeps acknowledging orders throughout,
// stays ready and says "degraded" in /health; afterwards the sink catches
// up with nothing missing or doubled.
func TestE2EPostgresOutage(t *testing.T) {
	outage := 10 * time.Second
	if testing.Short() {
		outage = 3 * time.Second
	}
	pg := pgtest.NewDB(t)
	proxy := pgtest.NewProxy(t, pg)
	dir := t.TempDir()
	s := e2eStart(t, dir, proxy.URL())
	e2eFund(t, s, 10)

	stop := make(chan struct{})
	var acked map[uint64]ackedOrder
	done := make(chan struct{})
	go func() { acked = e2eLoad(t, s, 4, 10, stop); close(done) }()
	time.Sleep(time.Second)
	proxy.Down()
	outageStart := s.metric("ubs_acked_seq")
	time.Sleep(outage)
	outageEnd := s.metric("ubs_acked_seq")
	if outageEnd-outageStart < 100 {
		t.Fatalf("the API stalled while Postgres was down: acked seq %v -> %v", outageStart, outageEnd)
	}
	if st, _ := s.do("GET", "/health/ready", "", nil); st != 200 {
		t.Fatalf("not ready while Postgres is down: %d", st)
	}
	if st, h := s.do("GET", "/health", "", nil); st != 200 || h["status"] != "degraded" {
		t.Fatalf("health while Postgres is down: %d %v", st, h)
	}
	if lag := s.metric("ubs_sink_lag_commands"); lag < 100 {
		t.Fatalf("sink lag %v while Postgres is down: the outage was not exercised", lag)
	}
	proxy.Up()
	time.Sleep(time.Second)
	close(stop)
	<-done
	if len(acked) < 100 {
		t.Fatalf("only %d orders acknowledged", len(acked))
	}
	e2eWaitSink(t, s, pg)
	e2eCheckAcked(t, s, acked)
	s.Stop()
	e2eConverged(t, dir, pg)
}
