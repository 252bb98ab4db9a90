package main

// A binary YES/NO market end to end against the real binary (issue 22): an
// admin creates it with a question (a bad one refused first) and activates
// it over HTTP, three users trade all four fill kinds (mint, transfer YES,
// transfer NO, burn), the admin resolves it and settles it in slices. After
// every step the users' USDT + the fee account's + the market's reserve +
// pnl pool equal what was credited, to the unit; at the end Postgres holds
// the market (SETTLED, YES, its question), the positions as the API last
// showed them (zeroed by settlement) and the trades with their fill kinds.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/persist/pgtest"
)

func TestBinaryMarketE2E(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewDB(t)
	s := e2eStart(t, t.TempDir(), pg)
	defer s.Stop()
	admin := s.token(1000, true)
	users := []uint64{11, 12, 13}
	tok := map[uint64]string{}
	for _, u := range users {
		tok[u] = s.token(u, false)
		if st, out := s.do("POST", "/admin/v1/adjust", admin, map[string]any{"user_id": u, "asset": "USDT",
			"amount": "1000", "ref": fmt.Sprint("bin-fund-", u)}); st != 200 {
			t.Fatalf("fund %d: %d %v", u, st, out)
		}
	}
	ok := func(method, path, token string, body any) map[string]any {
		t.Helper()
		st, out := s.do(method, path, token, body)
		if st != 200 {
			t.Fatalf("%s %s %v: %d %v\n%s", method, path, body, st, out, s.Logs())
		}
		return out
	}
	usdt := func(v any) int64 {
		n, err := gateway.ParseUnits(fmt.Sprint(v), 6)
		if err != nil && fmt.Sprint(v) != "0.000000" {
			t.Fatalf("decimal %v: %v", v, err)
		}
		return n
	}
	conserved := func(step string) {
		t.Helper()
		var sum int64
		for _, u := range users {
			for _, b := range ok("GET", "/api/v1/balances", tok[u], nil)["balances"].([]any) {
				if b := b.(map[string]any); b["asset"] == "USDT" {
					spot := b["spot"].(map[string]any)
					sum += usdt(spot["available"]) + usdt(spot["frozen"])
				}
			}
		}
		for _, f := range ok("GET", "/admin/v1/fees", admin, nil)["fees"].([]any) {
			if f := f.(map[string]any); f["asset"] == "USDT" {
				sum += usdt(f["available"]) + usdt(f["frozen"])
			}
		}
		m := ok("GET", "/api/v1/binary-markets/77", tok[11], nil)
		sum += usdt(m["reserve"]) + usdt(m["pnl_pool"])
		if sum != 3_000*1_000_000 {
			t.Fatalf("%s: USDT held %d units, credited %d", step, sum, 3_000*1_000_000)
		}
	}
	const question = "Will \"BTC\" close ≥ 100 000 USDT on 31/12/2027? ☔"
	if st, out := s.do("POST", "/admin/v1/binary-markets", admin, map[string]any{"market_id": 77, "quote": "USDT",
		"question": "two\nlines"}); st != 400 || out["code"] != "INVALID_QUESTION" {
		t.Fatalf("a bad question: %d %v", st, out)
	}
	if st, out := s.do("GET", "/api/v1/binary-markets/77", tok[11], nil); st != 400 || out["code"] != "NOT_BINARY" {
		t.Fatalf("after a bad question: %d %v", st, out)
	}
	if m := ok("POST", "/admin/v1/binary-markets", admin, map[string]any{"market_id": 77, "quote": "USDT",
		"maker_fee_ppm": 1000, "taker_fee_ppm": 2000, "question": question}); m["question"] != question {
		t.Fatalf("created: %v", m)
	}
	if m := ok("GET", "/api/v1/binary-markets/77", tok[11], nil); m["question"] != question {
		t.Fatalf("GET: %v", m)
	}
	ok("POST", "/admin/v1/binary-markets/77/activate", admin, nil)
	conserved("activated")
	order := func(u uint64, side, out, price string, qty int) map[string]any {
		t.Helper()
		return ok("POST", "/api/v1/order", tok[u], map[string]any{"market": "77", "outcome": out, "side": side,
			"type": "LIMIT", "price": price, "quantity": fmt.Sprint(qty)})
	}
	kinds := map[string]int{}
	take := func(o map[string]any) {
		fills, _ := o["fills"].([]any)
		for _, f := range fills {
			kinds[fmt.Sprint(f.(map[string]any)["kind"])]++
		}
	}
	order(11, "BUY", "YES", "0.60", 100)
	take(order(12, "BUY", "NO", "0.40", 100)) // MINT
	conserved("mint")
	order(11, "SELL", "YES", "0.65", 30)
	take(order(13, "BUY", "YES", "0.70", 30)) // TRANSFER_YES at 0.65
	conserved("transfer YES")
	order(12, "SELL", "NO", "0.45", 20)
	take(order(13, "BUY", "NO", "0.45", 20)) // TRANSFER_NO
	conserved("transfer NO")
	order(11, "SELL", "YES", "0.50", 50)
	take(order(12, "SELL", "NO", "0.50", 50)) // BURN
	conserved("burn")
	if kinds["MINT"] != 1 || kinds["TRANSFER_YES"] != 1 || kinds["TRANSFER_NO"] != 1 || kinds["BURN"] != 1 {
		t.Fatalf("fill kinds %v", kinds)
	}
	before := map[uint64]map[string]any{}
	for _, u := range users {
		ps := ok("GET", "/api/v1/positions", tok[u], nil)["positions"].([]any)
		if len(ps) != 1 {
			t.Fatalf("user %d positions %v", u, ps)
		}
		before[u] = ps[0].(map[string]any)
	}
	// Postgres catches up to the same positions, to the unit.
	conn := e2eConn(t, pg)
	ctx := context.Background()
	for _, u := range users {
		want := before[u]
		deadline := time.Now().Add(30 * time.Second)
		for {
			var yes, no, yc, nc, yp, np int64
			err := conn.QueryRow(ctx, `SELECT yes_volume, no_volume, yes_cost_sum, no_cost_sum, yes_pending_sell,
				no_pending_sell FROM positions WHERE market_id = 77 AND user_id = $1`, int64(u)).Scan(&yes, &no, &yc, &nc, &yp, &np)
			got := fmt.Sprint(yes, no, yc, nc, yp, np)
			exp := fmt.Sprint(want["yes_volume"], want["no_volume"], usdt(want["yes_cost_sum"]), usdt(want["no_cost_sum"]),
				want["yes_pending_sell"], want["no_pending_sell"])
			if err == nil && got == exp {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("user %d: positions row %s (%v), API %s", u, got, err, exp)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	r := ok("POST", "/admin/v1/binary-markets/77/resolve", admin, map[string]any{"outcome": "YES"})
	if r["status"] != "RESOLVED" {
		t.Fatalf("resolve: %v", r)
	}
	conserved("resolved")
	ok("POST", "/admin/v1/binary-markets/77/settle", admin, map[string]any{"limit": 1})
	conserved("settle slice")
	r = ok("POST", "/admin/v1/binary-markets/77/settle", admin, nil)
	if r["status"] != "SETTLED" || r["reserve"] != "0.000000" || r["pnl_pool"] != "0.000000" {
		t.Fatalf("settled: %v", r)
	}
	conserved("settled")

	// Postgres: the market, the positions (zeroed by settlement) and the trades with their kinds.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var status, outcome, q string
		var settled bool
		err := conn.QueryRow(ctx, `SELECT status, outcome, settled, question FROM binary_markets WHERE market_id = 77
			AND archived_seq IS NULL`).Scan(&status, &outcome, &settled, &q)
		if err == nil && status == "SETTLED" && outcome == "YES" && settled && q == question {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("binary_markets row: %s %s %v %q %v", status, outcome, settled, q, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM positions WHERE market_id = 77 AND yes_volume = 0
		AND no_volume = 0 AND yes_cost_sum = 0 AND no_cost_sum = 0 AND yes_pending_sell = 0 AND no_pending_sell = 0`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d zeroed positions rows: %v", n, err)
	}
	for kind, want := range map[string]int{"MINT": 1, "TRANSFER_YES": 1, "TRANSFER_NO": 1, "BURN": 1} {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM trades WHERE market_id = 77 AND fill_kind = $1`, kind).Scan(&n); err != nil || n != want {
			t.Fatalf("%d %s trades: %v", n, kind, err)
		}
	}
}
