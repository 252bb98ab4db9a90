package main

// End-to-end tests of the real binary against real Postgres: the README
// walk-through (token -> adjust -> crossing orders -> balances), every auth
// failure and bad input with its code (and no state change), and the rows
// the sink writes.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/stream/streamtest"
)

// dec parses a decimal string into units at scale (test helper; accepts
// zero and negatives, unlike the API's amount parser).
func dec(t *testing.T, v any, scale int) int64 { t.Helper(); return streamtest.Dec(t, v, scale) }

// id reads a JSON id that may be a number or a string.
func id(t *testing.T, v any) uint64 { t.Helper(); return streamtest.ID(t, v) }

// balances returns asset -> [available, frozen] in units.
func balances(t *testing.T, s *e2eServer, user uint64) map[string][2]int64 {
	t.Helper()
	st, body := s.do("GET", "/api/v1/balances", s.token(user, false), nil)
	if st != 200 {
		t.Fatalf("balances: %d %v", st, body)
	}
	list, _ := body["balances"].([]any)
	if list == nil {
		list, _ = body["_array"].([]any)
	}
	scale := map[string]int{"USDT": 6, "BTC": 8, "ETH": 8}
	out := map[string][2]int64{}
	for _, e := range list {
		m := e.(map[string]any)
		a := m["asset"].(string)
		sp := m["spot"].(map[string]any)
		out[a] = [2]int64{dec(t, sp["available"], scale[a]), dec(t, sp["frozen"], scale[a])}
	}
	return out
}

func wantCode(t *testing.T, what string, st int, body map[string]any, status int, code string) {
	t.Helper()
	if st != status || body == nil || body["code"] != code {
		t.Fatalf("%s: got %d %v, want %d %s", what, st, body, status, code)
	}
	if msg, _ := body["message"].(string); msg == "" {
		t.Fatalf("%s: error without a message: %v", what, body)
	}
}

func TestE2EWalkthrough(t *testing.T) {
	pg := pgtest.NewDB(t)
	s := e2eStart(t, t.TempDir(), pg)
	admin := s.token(1000, true)

	// Fund a seller with BTC and a buyer with USDT.
	for _, adj := range []map[string]any{
		{"user_id": 1, "asset": "BTC", "amount": "10", "ref": "fund-1"},
		{"user_id": 2, "asset": "USDT", "amount": "1000000", "ref": "fund-2"},
	} {
		if st, body := s.do("POST", "/admin/v1/adjust", admin, adj); st != 200 {
			t.Fatalf("adjust %v: %d %v", adj, st, body)
		}
	}
	// A repeat of the same ref changes nothing.
	if st, body := s.do("POST", "/admin/v1/adjust", admin, map[string]any{"user_id": 1, "asset": "BTC", "amount": "10", "ref": "fund-1"}); st != 200 {
		t.Fatalf("repeat adjust: %d %v", st, body)
	}
	if b := balances(t, s, 1); b["BTC"] != [2]int64{10_0000_0000, 0} {
		t.Fatalf("after a repeated adjust: %v", b)
	}

	u1, u2 := s.token(1, false), s.token(2, false)
	st, sell := s.do("POST", "/api/v1/order", u1, map[string]any{"market": "BTC-USDT", "side": "SELL", "type": "LIMIT",
		"time_in_force": "GTC", "price": "50000", "quantity": "1", "client_order_id": "s-1"})
	if st != 200 || sell["status"] != "NEW" {
		t.Fatalf("sell: %d %v", st, sell)
	}
	sellID := id(t, sell["order_id"])
	st, buy := s.do("POST", "/api/v1/order", u2, map[string]any{"market": "BTC-USDT", "side": "BUY", "type": "LIMIT",
		"time_in_force": "GTC", "price": "50010", "quantity": "0.4"})
	if st != 200 || buy["status"] != "FILLED" {
		t.Fatalf("buy: %d %v", st, buy)
	}
	fills := buy["fills"].([]any)
	if len(fills) != 1 {
		t.Fatalf("fills: %v", fills)
	}
	f := fills[0].(map[string]any)
	if dec(t, f["price"], 6) != 50000_000000 || dec(t, f["quantity"], 8) != 4000_0000 ||
		dec(t, f["fee"], 6) != 40_000000 || f["fee_asset"] != "USDT" || id(t, f["maker_order_id"]) != sellID {
		t.Fatalf("fill at the maker price with the taker fee expected: %v", f)
	}
	// Notional 20000 USDT: taker fee 0.2% = 40, maker fee 0.1% = 20.
	b1, b2 := balances(t, s, 1), balances(t, s, 2)
	if b1["BTC"] != [2]int64{9_0000_0000, 6000_0000} || b1["USDT"] != [2]int64{19980_000000, 0} {
		t.Fatalf("seller balances %v", b1)
	}
	if b2["BTC"] != [2]int64{4000_0000, 0} || b2["USDT"] != [2]int64{979960_000000, 0} {
		t.Fatalf("buyer balances %v", b2)
	}

	// Depth, trades and order queries agree.
	st, depth := s.do("GET", "/api/v1/depth/BTC-USDT?limit=5", u2, nil)
	if st != 200 {
		t.Fatalf("depth: %d %v", st, depth)
	}
	asks := depth["asks"].([]any)
	if len(asks) != 1 || dec(t, asks[0].([]any)[0], 6) != 50000_000000 || dec(t, asks[0].([]any)[1], 8) != 6000_0000 {
		t.Fatalf("depth asks %v", asks)
	}
	st, trades := s.do("GET", "/api/v1/trades/BTC-USDT?limit=10", u2, nil)
	if st != 200 {
		t.Fatalf("trades: %d %v", st, trades)
	}
	tl, _ := trades["trades"].([]any)
	if tl == nil {
		tl, _ = trades["_array"].([]any)
	}
	if len(tl) != 1 || dec(t, tl[0].(map[string]any)["price"], 6) != 50000_000000 {
		t.Fatalf("trades %v", trades)
	}
	st, o := s.do("GET", fmt.Sprintf("/api/v1/order/%d", sellID), u1, nil)
	if st != 200 || o["status"] != "PARTIALLY_FILLED" || dec(t, o["filled_quantity"], 8) != 4000_0000 || o["client_order_id"] != "s-1" {
		t.Fatalf("sell order: %d %v", st, o)
	}
	// Another user's order is not found (its existence is not revealed).
	s.expect("other user's order", "GET", fmt.Sprintf("/api/v1/order/%d", sellID), u2, nil, 404, "ORDER_NOT_FOUND")
	st, open := s.do("GET", "/api/v1/orders?market=BTC-USDT&status=open", u1, nil)
	if st != 200 {
		t.Fatalf("open orders: %d %v", st, open)
	}
	ol, _ := open["orders"].([]any)
	if ol == nil {
		ol, _ = open["_array"].([]any)
	}
	if len(ol) != 1 || id(t, ol[0].(map[string]any)["order_id"]) != sellID {
		t.Fatalf("open orders %v", open)
	}
	// The same client_order_id again returns the live order, no second one.
	st, dup := s.do("POST", "/api/v1/order", u1, map[string]any{"market": "BTC-USDT", "side": "SELL", "type": "LIMIT",
		"time_in_force": "GTC", "price": "50000", "quantity": "1", "client_order_id": "s-1"})
	if st != 200 || id(t, dup["order_id"]) != sellID {
		t.Fatalf("duplicate client_order_id: %d %v", st, dup)
	}
	if b := balances(t, s, 1); b["BTC"] != b1["BTC"] {
		t.Fatalf("a duplicate client order id froze funds: %v", b)
	}
	// Cancel releases the frozen remainder.
	if st, c := s.do("DELETE", fmt.Sprintf("/api/v1/order/%d", sellID), u1, nil); st != 200 || c["status"] != "CANCELLED" {
		t.Fatalf("cancel: %d %v", st, c)
	}
	if b := balances(t, s, 1); b["BTC"] != [2]int64{9_6000_0000, 0} {
		t.Fatalf("after cancel %v", b)
	}

	// The sink writes the rows; the checkpoint reaches the durable seq.
	e2eWaitSink(t, s, pg)
	ctx := context.Background()
	conn := e2eConn(t, pg)
	var nTrades, tradeQty int64
	if err := conn.QueryRow(ctx, "SELECT count(*), coalesce(sum(quantity),0) FROM trades").Scan(&nTrades, &tradeQty); err != nil {
		t.Fatal(err)
	}
	if nTrades != 1 || tradeQty != 4000_0000 {
		t.Fatalf("trades rows: %d, qty %d", nTrades, tradeQty)
	}
	var status string
	var filled int64
	if err := conn.QueryRow(ctx, "SELECT status, filled_quantity FROM orders WHERE order_id=$1", sellID).Scan(&status, &filled); err != nil {
		t.Fatal(err)
	}
	if status != "CANCELLED" || filled != 4000_0000 {
		t.Fatalf("orders row: %s %d", status, filled)
	}
	var avail, frozen int64
	if err := conn.QueryRow(ctx, "SELECT coalesce(sum(d_available),0), coalesce(sum(d_frozen),0) FROM spot_ledger WHERE user_id=2 AND asset_id=1").Scan(&avail, &frozen); err != nil {
		t.Fatal(err)
	}
	if avail != 979960_000000 || frozen != 0 {
		t.Fatalf("spot_ledger sums for the buyer's USDT: %d %d", avail, frozen)
	}
	var kinds []string
	rows, err := conn.Query(ctx, "SELECT DISTINCT event_type FROM wal_events ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, k)
	}
	if strings.Join(kinds, ",") != "ORDER_ACCEPTED,ORDER_CANCELLED,ORDER_MATCHED,ORDER_PARTIALLY_FILLED" {
		t.Fatalf("wal_events types %v", kinds)
	}
	s.Stop()
}

// expect sends a request and requires the error status and code.
func (s *e2eServer) expect(what, method, path, token string, body any, status int, code string) {
	s.t.Helper()
	st, b := s.do(method, path, token, body)
	wantCode(s.t, what, st, b, status, code)
}

// e2eConn connects to the test database pg; the test closes it at its end.
func e2eConn(t *testing.T, pg string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// e2eWaitSink waits until core_checkpoint reaches the server's durable seq
// (read from /metrics).
func e2eWaitSink(t *testing.T, s *e2eServer, pg string) {
	t.Helper()
	ctx := context.Background()
	conn := e2eConn(t, pg)
	durable := s.metric("ubs_durable_seq")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var p int64
		err := conn.QueryRow(ctx, "SELECT persisted_seq FROM core_checkpoint WHERE id=1").Scan(&p)
		if err == nil && float64(p) >= durable {
			if float64(p) != durable {
				t.Fatalf("persisted seq %d beyond durable %v", p, durable)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sink did not reach durable seq %v (persisted %d, err %v)", durable, p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric reads one unlabelled sample from /metrics.
func (s *e2eServer) metric(name string) float64 {
	s.t.Helper()
	st, raw := s.doRaw("GET", "/metrics", "", nil)
	if st != 200 {
		s.t.Fatalf("/metrics: %d", st)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, name)), 64)
			if err != nil {
				s.t.Fatal(err)
			}
			return v
		}
	}
	s.t.Fatalf("metric %s not found", name)
	return 0
}

func TestE2EAuthAndBadInput(t *testing.T) {
	pg := pgtest.NewDB(t)
	s := e2eStart(t, t.TempDir(), pg)
	admin := s.token(1000, true)
	if st, body := s.do("POST", "/admin/v1/adjust", admin, map[string]any{"user_id": 7, "asset": "USDT", "amount": "100000", "ref": "f7"}); st != 200 {
		t.Fatalf("adjust: %d %v", st, body)
	}
	u7 := s.token(7, false)
	order := func(kv ...any) map[string]any {
		m := map[string]any{"market": "BTC-USDT", "side": "BUY", "type": "LIMIT", "time_in_force": "GTC", "price": "50000", "quantity": "0.1"}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}

	// Authentication and authorisation.
	other, err := gatewayAuthenticator("another-secret-0123456789abcdef0123456789")
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := other.Mint(7, true, time.Hour, time.Now())
	expired, _ := s.auth.Mint(7, false, time.Minute, time.Now().Add(-time.Hour))
	// alg "none": header {"alg":"none","typ":"JWT"}, payload {"sub":"7","exp":<future>}.
	none := b64(`{"alg":"none","typ":"JWT"}`) + "." + b64(fmt.Sprintf(`{"sub":"7","exp":%d}`, time.Now().Add(time.Hour).Unix())) + "."
	for _, c := range []struct{ name, token string }{
		{"missing", ""}, {"malformed", "not-a-jwt"}, {"expired", expired}, {"forged", forged}, {"alg none", none},
	} {
		s.expect("auth "+c.name, "GET", "/api/v1/balances", c.token, nil, 401, "UNAUTHORIZED")
		s.expect("auth "+c.name+" (order)", "POST", "/api/v1/order", c.token, order(), 401, "UNAUTHORIZED")
	}
	s.expect("non-admin on admin route", "POST", "/admin/v1/adjust", u7, map[string]any{"user_id": 7, "asset": "USDT", "amount": "1", "ref": "x"}, 403, "FORBIDDEN")
	s.expect("non-admin halts a market", "POST", "/admin/v1/markets/BTC-USDT/halt", u7, nil, 403, "FORBIDDEN")

	// A resting order of another user, so "the book did not change" means something.
	if st, b := s.do("POST", "/admin/v1/adjust", admin, map[string]any{"user_id": 8, "asset": "BTC", "amount": "1", "ref": "f8"}); st != 200 {
		t.Fatalf("adjust: %d %v", st, b)
	}
	if st, b := s.do("POST", "/api/v1/order", s.token(8, false), order("side", "SELL", "price", "60000")); st != 200 {
		t.Fatalf("resting sell: %d %v", st, b)
	}
	before := balances(t, s, 7)
	_, depthBefore := s.do("GET", "/api/v1/depth/BTC-USDT", u7, nil)
	if asks, _ := depthBefore["asks"].([]any); len(asks) != 1 {
		t.Fatalf("depth before: %v", depthBefore)
	}
	for _, c := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"too many decimals", order("quantity", "0.123456789"), 400, "PRECISION_OVERFLOW"},
		{"price too many decimals", order("price", "50000.0000001"), 400, "PRECISION_OVERFLOW"},
		{"beyond int64", order("quantity", "99999999999999999999"), 400, "OVERFLOW"},
		{"zero quantity", order("quantity", "0"), 400, "INVALID_AMOUNT"},
		{"negative quantity", order("quantity", "-1"), 400, "INVALID_AMOUNT"},
		{"negative price", order("price", "-50000"), 400, "INVALID_AMOUNT"},
		{"price off the tick", order("price", "50000.001"), 400, "INVALID_PRICE"},
		{"quantity off the lot", order("quantity", "0.00001"), 400, "INVALID_QUANTITY"},
		{"unknown market", order("market", "DOGE-USDT"), 400, "INVALID_MARKET"},
		{"insufficient balance", order("quantity", "100"), 0, "INSUFFICIENT_BALANCE"},
	} {
		st, b := s.do("POST", "/api/v1/order", u7, c.body)
		if c.status == 0 { // a core rejection: some 4xx with the core's code
			if st < 400 || st > 499 || b["code"] != c.code {
				t.Fatalf("%s: %d %v, want 4xx %s", c.name, st, b, c.code)
			}
		} else {
			wantCode(t, c.name, st, b, c.status, c.code)
		}
	}
	for _, c := range []struct {
		name string
		body string
	}{
		{"unknown field", `{"market":"BTC-USDT","side":"BUY","type":"LIMIT","time_in_force":"GTC","price":"50000","quantity":"0.1","leverage":"100"}`},
		{"malformed JSON", `{"market":`},
		{"number instead of string", `{"market":"BTC-USDT","side":"BUY","type":"LIMIT","time_in_force":"GTC","price":50000,"quantity":"0.1"}`},
		{"bad side", `{"market":"BTC-USDT","side":"UP","type":"LIMIT","time_in_force":"GTC","price":"50000","quantity":"0.1"}`},
	} {
		st, b := s.do("POST", "/api/v1/order", u7, c.body)
		if st != 400 || b == nil || b["code"] == nil || b["code"] == "" {
			t.Fatalf("%s: %d %v, want 400 with a code", c.name, st, b)
		}
	}
	big := `{"market":"BTC-USDT","client_order_id":"` + strings.Repeat("x", 1<<20) + `"}`
	if st, _ := s.doRaw("POST", "/api/v1/order", u7, big); st != 413 {
		t.Fatalf("1 MiB body: %d, want 413", st)
	}
	s.expect("adjust zero", "POST", "/admin/v1/adjust", admin, map[string]any{"user_id": 7, "asset": "USDT", "amount": "0", "ref": "z"}, 400, "INVALID_AMOUNT")
	s.expect("adjust unknown asset", "POST", "/admin/v1/adjust", admin, map[string]any{"user_id": 7, "asset": "XYZ", "amount": "1", "ref": "z"}, 400, "INVALID_ASSET")
	s.expect("cancel unknown order", "DELETE", "/api/v1/order/999999", u7, nil, 404, "ORDER_NOT_FOUND")

	if after := balances(t, s, 7); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("bad input changed balances: %v -> %v", before, after)
	}
	// (The depth's seq moves: a rejected command is still sequenced.)
	if _, depthAfter := s.do("GET", "/api/v1/depth/BTC-USDT", u7, nil); fmt.Sprint(depthAfter["bids"], depthAfter["asks"]) != fmt.Sprint(depthBefore["bids"], depthBefore["asks"]) {
		t.Fatalf("bad input changed the book: %v -> %v", depthBefore, depthAfter)
	}

	// Halted market: orders rejected with MARKET_HALTED, health degraded.
	if st, b := s.do("POST", "/admin/v1/markets/BTC-USDT/halt", admin, nil); st != 200 {
		t.Fatalf("halt: %d %v", st, b)
	}
	if st, b := s.do("POST", "/api/v1/order", u7, order()); st < 400 || b["code"] != "MARKET_HALTED" {
		t.Fatalf("order on a halted market: %d %v", st, b)
	}
	if st, h := s.do("GET", "/health", "", nil); st != 200 || h["status"] != "degraded" {
		t.Fatalf("health with a halted market: %d %v", st, h)
	}
	if st, b := s.do("POST", "/admin/v1/markets/BTC-USDT/resume", admin, nil); st != 200 {
		t.Fatalf("resume: %d %v", st, b)
	}
	if st, h := s.do("GET", "/health", "", nil); st != 200 || h["status"] != "healthy" {
		t.Fatalf("health after resume: %d %v", st, h)
	}
	// A frozen account cannot trade.
	if st, b := s.do("POST", "/admin/v1/accounts/7/status", admin, map[string]any{"status": "FROZEN"}); st != 200 {
		t.Fatalf("freeze: %d %v", st, b)
	}
	if st, b := s.do("POST", "/api/v1/order", u7, order()); st < 400 || b["code"] != "ACCOUNT_FROZEN" {
		t.Fatalf("order from a frozen account: %d %v", st, b)
	}
	s.Stop()
}
