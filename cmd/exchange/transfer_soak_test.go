package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/pgtest"
)

// TestTransferSoak is the randomized soak of internal transfers against the
// real binary and Postgres: many users move funds FUNDING <-> SPOT in both
// directions while they trade on BTC-USDT, adapter faults are injected at
// random (explicit failures, timeouts before and after the effect, network
// errors) and every round ends with a SIGKILL, an injected crash inside an
// adapter call, or a graceful stop. Checked:
//
//   - the conservation check (GET /admin/v1/invariants) holds to the unit in
//     the middle of every round, with transfers and orders in flight, and
//     never halts transfers;
//   - after the faults are cleared every transfer reaches a terminal state,
//     every transfer the API named exists, and the check holds again;
//   - independently of the server's check: per asset, the FUNDING ledger
//     plus the SPOT ledger the sink wrote (every balance change) equals the
//     external deposits, to the unit.
//
// -short: 3 rounds of 3 s; otherwise 8 rounds of 6 s.
func TestTransferSoak(t *testing.T) { transferSoak(t, true) }

// TestTransferSoakFused is the soak without fault injection (the server
// runs the same one path, fused steps, as with it); rounds end with
// SIGKILL or a graceful stop.
func TestTransferSoakFused(t *testing.T) { transferSoak(t, false) }

func transferSoak(t *testing.T, faults bool) {
	rounds, roundLen, users := 8, 6*time.Second, 24
	if testing.Short() {
		rounds, roundLen, users = 3, 3*time.Second, 12
	}
	pg := pgtest.NewDB(t)
	dir := t.TempDir()
	flags := []string{"--transfer-stale-after", "1s", "--transfer-rate-per-second", "0",
		"--transfer-per-day", "0", "--invariant-interval", "500ms"}
	if faults {
		flags = append(flags, "--enable-fault-injection")
	}
	s := e2eStart(t, dir, pg, flags...)
	admin := s.token(1000, true)
	soakWaitTransfers(t, s, admin)
	tokens := make([]string, users)
	const firstUser = 501
	for i := range users {
		u := firstUser + i
		tokens[i] = s.token(uint64(u), false)
		for _, a := range [][2]string{{"USDT", "100000"}, {"BTC", "10"}} {
			st, b := s.do("POST", "/admin/v1/deposit", admin, map[string]any{"user_id": u, "asset": a[0], "amount": a[1],
				"tx_ref": fmt.Sprintf("soak-%d-%s", u, a[0])})
			if st != 200 || b["credited"] != true {
				t.Fatalf("deposit: %d %v", st, b)
			}
		}
	}

	var (
		mu       sync.Mutex
		named    = map[string]bool{} // req_ids the API answered with
		answers  = map[int]int{}     // HTTP status -> count (transfers)
		orders   atomic.Int64
		problems []string
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	worker := func(seed uint64, srv *e2eServer, stop <-chan struct{}, wg *sync.WaitGroup) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 7))
		for {
			select {
			case <-stop:
				return
			default:
			}
			i := rng.IntN(users)
			if rng.IntN(10) < 6 {
				from, to := "FUNDING", "SPOT"
				if rng.IntN(2) == 0 {
					from, to = to, from
				}
				asset, amount := "USDT", fmt.Sprintf("%d.%02d", 1+rng.IntN(500), rng.IntN(100))
				if rng.IntN(3) == 0 {
					asset, amount = "BTC", fmt.Sprintf("0.%05d", 1+rng.IntN(20000))
				}
				st, b, err := srv.tryDo("POST", "/api/v1/internal_transfer", tokens[i],
					map[string]any{"from": from, "to": to, "asset": asset, "amount": amount})
				if err != nil {
					continue // the server is being killed
				}
				mu.Lock()
				answers[st]++
				if id, ok := b["req_id"].(string); ok {
					named[id] = true
				}
				mu.Unlock()
				switch st {
				case 200, 202:
				case 400:
					switch c, _ := b["code"].(string); c {
					case "INSUFFICIENT_BALANCE", "INJECTED", "SOURCE_ACCOUNT_NOT_FOUND": // SOURCE: a SPOT account not yet credited
					default:
						problem("transfer refused with %v", b)
					}
				default:
					problem("transfer answered %d %v", st, b)
				}
				continue
			}
			side, price := "BUY", 49_500+rng.IntN(1_000)
			if rng.IntN(2) == 0 {
				side = "SELL"
			}
			st, b, err := srv.tryDo("POST", "/api/v1/order", tokens[i], map[string]any{"market": "BTC-USDT", "side": side,
				"type": "LIMIT", "price": fmt.Sprintf("%d.00", price), "quantity": fmt.Sprintf("0.%04d", 1+rng.IntN(50))})
			if err == nil && st == 200 {
				orders.Add(1)
			} else if err == nil && st >= 500 && st != 503 {
				problem("order answered %d %v", st, b)
			}
		}
	}
	modes := []string{"explicit_fail", "timeout_after_effect", "timeout_before_effect", "network_error"}
	adapters, ops := []string{"funding", "spot"}, []string{"withdraw", "deposit", "refund"}
	rng := rand.New(rand.NewPCG(1, 2))
	crashes := 0 // injected crashes that killed the server
	for r := range rounds {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Add(1)
			go worker(uint64(r*100+w), s, stop, &wg)
		}
		end := time.Now().Add(roundLen)
		checked := false
		for time.Now().Before(end) {
			time.Sleep(250 * time.Millisecond)
			if faults {
				st, b, err := s.tryDo("POST", "/admin/v1/faults", admin, map[string]any{"adapter": adapters[rng.IntN(2)],
					"op": ops[rng.IntN(3)], "mode": modes[rng.IntN(len(modes))], "count": 1 + rng.IntN(2)})
				if err != nil || st != 200 {
					t.Fatalf("inject: %d %v %v", st, b, err)
				}
			}
			if !checked && time.Until(end) < roundLen/2 { // mid-round, everything moving
				checked = true
				st, inv, err := s.tryDo("GET", "/admin/v1/invariants", admin, nil)
				if err != nil || st != 200 || inv["ok"] != true || inv["transfers_halted"] != false {
					t.Fatalf("round %d: conservation check under load: %d %v %v", r, st, inv, err)
				}
				t.Logf("round %d: invariant ok with %v transfers moving", r, inv["moving_transfers"])
			}
		}
		switch r % 3 {
		case 0: // SIGKILL with requests in flight
			s.Kill()
		case 1:
			if !faults {
				s.Kill()
				break
			}
			// an injected crash inside an adapter call
			mode := []string{"crash_before", "crash_after"}[rng.IntN(2)]
			_, _, _ = s.tryDo("POST", "/admin/v1/faults", admin, map[string]any{"adapter": adapters[rng.IntN(2)],
				"op": []string{"withdraw", "deposit"}[rng.IntN(2)], "mode": mode, "count": 1})
			select {
			case <-s.exited:
				crashes++
			case <-time.After(5 * time.Second):
				s.Kill() // no call reached that op in time
			}
		default:
			close(stop)
			wg.Wait()
			stop = nil
			s.Stop()
		}
		if stop != nil {
			close(stop)
			wg.Wait()
		}
		s = e2eStart(t, dir, pg, flags...)
		soakWaitTransfers(t, s, admin)
	}
	if faults {
		if st, b := s.do("DELETE", "/admin/v1/faults", admin, nil); st != 200 {
			t.Fatalf("clear faults: %d %v", st, b)
		}
	}
	mu.Lock()
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("transfer answers by status %v, %d orders accepted, %d transfers named", answers, orders.Load(), len(named))
	mu.Unlock()
	if faults && crashes == 0 {
		t.Error("no injected crash took effect")
	}
	if answers[200] < 20 || orders.Load() < 20 {
		t.Fatalf("too little traffic to mean anything: %v transfers, %d orders", answers, orders.Load())
	}

	ctx := context.Background()
	conn := e2eConn(t, pg)
	waitTransfersTerminal(t, conn, 90*time.Second)
	for id := range named {
		var state int
		if err := conn.QueryRow(ctx, `SELECT state FROM transfers_tb WHERE req_id = $1`, id).Scan(&state); err != nil {
			t.Fatalf("transfer %s named by the API: %v", id, err)
		}
	}
	var byState = map[int]int{}
	rows, err := conn.Query(ctx, `SELECT state, count(*) FROM transfers_tb GROUP BY state`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var st, n int
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		byState[st] = n
	}
	t.Logf("transfers by final state: %v", byState)
	// The one path (issue 34): every SPOT->FUNDING transfer committed in the
	// transaction of its FUNDING deposit (the same xmin), a fused step.
	var sf, fused int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE t.xmin = o.xmin) FROM transfers_tb t
		JOIN transfer_operations o ON o.req_id = t.req_id AND o.op = 'deposit'
		WHERE t.from_account = 'SPOT' AND t.state = 40`).Scan(&sf, &fused); err != nil || sf == 0 || fused != sf {
		t.Fatalf("%d of %d committed SPOT->FUNDING transfers committed with their deposit (%v), want all of them (and some)", fused, sf, err)
	}
	if faults && (byState[-30] == 0 || byState[-10] == 0) || byState[40] == 0 {
		t.Errorf("the soak did not reach every terminal state (committed, failed, rolled back): %v", byState)
	}
	if st, inv := s.do("GET", "/admin/v1/invariants", admin, nil); st != 200 || inv["ok"] != true {
		t.Fatalf("conservation check after the soak: %d %v", st, inv)
	}

	// The independent check, from the two ledgers in Postgres.
	e2eWaitSink(t, s, pg)
	ledgersBalance(t, conn, nil)
	s.Stop()
}

// waitTransfersTerminal waits (bounded) until no transfer is moving.
func waitTransfersTerminal(t *testing.T, conn *pgx.Conn, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var open int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM transfers_tb WHERE state NOT IN (40, -10, -30)`).
			Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transfers still not terminal after %v", open, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ledgersBalance is the conservation check from the two ledgers in Postgres,
// independent of the server's: per asset (USDT, BTC), FUNDING plus every
// SPOT balance change the sink wrote equals the external deposits plus the
// operator's SPOT adjustments (adjusted, in asset units; nil: none).
func ledgersBalance(t *testing.T, conn *pgx.Conn, adjusted map[int]int64) {
	t.Helper()
	for _, asset := range []int{1, 2} {
		var funding, spot, deposits int64
		if err := conn.QueryRow(context.Background(), `SELECT
			(SELECT COALESCE(sum(available), 0) FROM balances_tb WHERE asset_id = $1)::bigint,
			(SELECT COALESCE(sum(d_available + d_frozen), 0) FROM spot_ledger WHERE asset_id = $1)::bigint,
			(SELECT COALESCE(sum(amount), 0) FROM funding_deposits WHERE asset_id = $1)::bigint`, asset).
			Scan(&funding, &spot, &deposits); err != nil {
			t.Fatal(err)
		}
		if funding+spot != deposits+adjusted[asset] {
			t.Errorf("asset %d: funding %d + spot %d = %d, deposits %d + adjustments %d: off by %d", asset, funding, spot,
				funding+spot, deposits, adjusted[asset], funding+spot-deposits-adjusted[asset])
		}
	}
}

// soakWaitTransfers checks that the transfer service answers as soon as
// the server is ready (issue 20).
func soakWaitTransfers(t *testing.T, s *e2eServer, admin string) {
	t.Helper()
	if st, b, err := s.tryDo("GET", "/admin/v1/invariants", admin, nil); err != nil || st != 200 {
		t.Fatalf("ready, but the transfer service answers %d %v %v", st, b, err)
	}
}
