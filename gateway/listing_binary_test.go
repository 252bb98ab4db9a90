package gateway

// A prediction-market user's history (issue 40 item 6): binary orders are
// listed by GET /api/v1/orders (open, from the core; all, from History and,
// past its window, from the archive) and their fills by GET
// /api/v1/my-trades, with "outcome" and the order's own side and price
// (BUY NO @0.30 is listed as BUY NO 0.30, not as the YES book's SELL 0.70),
// beside the caller's spot orders; ?market= takes a binary market's id.

import (
	"testing"
	"time"
)

func TestBinaryOrderHistoryAndMyTrades(t *testing.T) {
	arch := &lagArchive{h: History{Window: MaxFinishedOrders}}
	h := newHarness(t, func(c *ServerConfig) { c.Archive = arch })
	h.be.h.Window = 2 // finished orders and trades kept in memory: the older ones are the archive's
	h.be.tap = arch.tap
	h.srv.archiveWait = 50 * time.Millisecond
	for _, u := range []uint64{1, 2, 3, 4} {
		h.fund(u, "USDT", "1000")
		h.fund(u, "BTC", "1")
	}
	u1, u2 := h.token(1), h.token(2)
	h.ok("POST", "/admin/v1/binary-markets", h.admin, `{"market_id":7,"quote":"USDT","maker_fee_ppm":1000,`+
		`"taker_fee_ppm":2000,"question":"Seven?"}`)
	h.ok("POST", "/admin/v1/binary-markets/7/activate", h.admin, "")
	order := func(tok, side, out, price string, qty int) uint64 {
		t.Helper()
		o := h.ok("POST", "/api/v1/order", tok, `{"market":"7","outcome":"`+out+`","side":"`+side+`","type":"LIMIT",`+
			`"price":"`+price+`","quantity":"`+itoa(int64(qty))+`"}`)
		return num(t, o["order_id"])
	}
	type want struct {
		side, outcome, price, status, filled string
	}
	mine := map[uint64]want{}
	a := order(u1, "BUY", "NO", "0.30", 10) // rests as book SELL 0.70
	mine[a] = want{"BUY", "NO", "0.300000", "NEW", "0"}
	b := order(u1, "BUY", "NO", "0.55", 10) // rests as book SELL 0.45
	order(u2, "BUY", "YES", "0.45", 4)      // mints 4 against b
	mine[b] = want{"BUY", "NO", "0.550000", "PARTIALLY_FILLED", "4"}
	order(u2, "BUY", "YES", "0.40", 3)     // rests as book BUY 0.40
	c := order(u1, "BUY", "NO", "0.60", 3) // a NO taker: book SELL 0.40, mints 3
	mine[c] = want{"BUY", "NO", "0.600000", "FILLED", "3"}
	spot := h.ok("POST", "/api/v1/order", u1, orderBody("side", "SELL", "price", "60000", "quantity", "0.01"))
	mine[num(t, spot["order_id"])] = want{"SELL", "", "60000.000000", "NEW", "0.00000000"}
	u3, u4 := h.token(3), h.token(4)
	for range 3 { // others' trades push the fills of b and c below History's trade floor
		order(u3, "BUY", "YES", "0.40", 1)
		order(u4, "BUY", "NO", "0.60", 1)
	}
	for range 4 { // finished orders push a, b and c below History's floor
		id := order(u1, "BUY", "YES", "0.10", 1)
		h.ok("DELETE", "/api/v1/order/"+itoa(int64(id)), u1, "")
		mine[id] = want{"BUY", "YES", "0.100000", "CANCELLED", "0"}
	}
	if fl := h.be.h.Floors(); uint64(fl.Order) <= c || fl.Trade == NoFloor || fl.Trade <= 2 {
		t.Fatalf("floors %+v: the window did not push the binary history into the archive", fl)
	}
	checkOrder := func(what string, o map[string]any) {
		t.Helper()
		id := num(t, o["order_id"])
		w, ok := mine[id]
		if !ok {
			t.Fatalf("%s: order %d is not user 1's: %v", what, id, o)
		}
		out, _ := o["outcome"].(string)
		if o["side"] != w.side || out != w.outcome || o["price"] != w.price || o["status"] != w.status ||
			o["filled_quantity"] != w.filled {
			t.Errorf("%s: order %d = %v, want %+v", what, id, o, w)
		}
		if w.outcome != "" && (o["market"] != "7" || o["type"] != "LIMIT") {
			t.Errorf("%s: binary order %d: %v", what, id, o)
		}
	}
	for _, limit := range []int{1, 3, 100} {
		all := h.listAll("/api/v1/orders?status=all", "orders", u1, limit)
		if len(all) != len(mine) {
			t.Fatalf("status=all limit %d: %d orders, want %d: %v", limit, len(all), len(mine), all)
		}
		for i, o := range all {
			checkOrder("status=all", o)
			if i > 0 && num(t, o["order_id"]) >= num(t, all[i-1]["order_id"]) {
				t.Fatalf("status=all: not newest first: %v", all)
			}
		}
		bin := h.listAll("/api/v1/orders?status=all&market=7", "orders", u1, limit)
		if len(bin) != len(mine)-1 {
			t.Fatalf("market=7: %d orders, want %d", len(bin), len(mine)-1)
		}
	}
	open := list(t, h.ok("GET", "/api/v1/orders", u1, "")["orders"]) // from the core
	if len(open) != 3 {
		t.Fatalf("open orders: %v", open)
	}
	for _, o := range open {
		checkOrder("status=open", o.(map[string]any))
	}
	if o := list(t, h.ok("GET", "/api/v1/orders?market=7", u1, "")["orders"]); len(o) != 2 {
		t.Fatalf("open orders of market 7: %v", o)
	}
	h.fails("GET", "/api/v1/orders?market=8", u1, "", 400, "INVALID_MARKET")

	// my-trades: each side's own outcome, side and price (the book price is 0.45 and 0.40)
	type fill struct{ order, outcome, side, price, qty, quote, maker string }
	for _, tc := range []struct {
		tok  string
		want []fill
	}{
		{u1, []fill{{itoa(int64(c)), "NO", "BUY", "0.600000", "3", "1.800000", "false"},
			{itoa(int64(b)), "NO", "BUY", "0.550000", "4", "2.200000", "true"}}},
		{u2, []fill{{"", "YES", "BUY", "0.400000", "3", "1.200000", "true"},
			{"", "YES", "BUY", "0.450000", "4", "1.800000", "false"}}},
	} {
		for _, limit := range []int{1, 100} {
			got := h.listAll("/api/v1/my-trades?market=7", "trades", tc.tok, limit)
			if len(got) != len(tc.want) {
				t.Fatalf("my-trades limit %d: %v", limit, got)
			}
			for i, w := range tc.want {
				g := got[i]
				if (w.order != "" && itoa(int64(num(t, g["order_id"]))) != w.order) || g["outcome"] != w.outcome ||
					g["side"] != w.side || g["price"] != w.price || g["quantity"] != w.qty || g["quote_quantity"] != w.quote ||
					itoaBool(g["is_maker"]) != w.maker || g["market"] != "7" {
					t.Errorf("my-trades limit %d, fill %d: %v, want %+v", limit, i, g, w)
				}
			}
		}
	}
}

func itoaBool(v any) string {
	if b, ok := v.(bool); ok && b {
		return "true"
	}
	return "false"
}
