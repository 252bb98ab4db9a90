package gateway

import (
	"fmt"
	"testing"
)

// TestStandbyAnswersWhatPostgresHolds: a standby (no Postgres, so no
// archive and no FUNDING ledger) answers history pages and orders within
// its History's complete part, and 503 NOT_PRIMARY naming the primary for
// what only the primary's Postgres holds: a page reaching below the
// window, an order below it; GET /balances serves SPOT with each "funding"
// null and "funding_error" NOT_PRIMARY. A History complete from seq 1
// (FromStart) answers a short page as it is.
func TestStandbyAnswersWhatPostgresHolds(t *testing.T) {
	rep := &fakeReplica{}
	rep.primary.Store(true) // the orders are placed while this node is the primary
	rep.accepting.Store(true)
	h := newHarness(t, func(c *ServerConfig) { c.Replica = rep })
	h.be.h.Window = 2 // finished orders and trades kept in memory
	for _, u := range []uint64{1, 2} {
		h.fund(u, "BTC", "10")
		h.fund(u, "USDT", "1000000")
	}
	u1, u2 := h.token(1), h.token(2)
	var ids []uint64
	for i := range 8 {
		o := h.ok("POST", "/api/v1/order", u1, orderBody("side", "SELL", "price", fmt.Sprint(50000+i), "quantity", "0.01"))
		ids = append(ids, num(t, o["order_id"]))
		h.ok("POST", "/api/v1/order", u2, orderBody("side", "BUY", "price", fmt.Sprint(50000+i), "quantity", "0.01"))
	}
	if fl := h.be.h.Floors(); uint64(fl.Order) <= ids[0] || fl.Trade <= 1 {
		t.Fatalf("floors %+v: the window kept everything", fl)
	}
	rep.primary.Store(false) // a standby now
	newest := ids[len(ids)-1]
	if o := h.ok("GET", "/api/v1/order/"+itoa(int64(newest)), u1, ""); num(t, o["order_id"]) != newest {
		t.Fatalf("the newest order on the standby: %v", o)
	}
	h.fails("GET", "/api/v1/order/"+itoa(int64(ids[0])), u1, "", 503, CodeNotPrimary)
	if page := h.ok("GET", "/api/v1/orders?status=all&limit=1", u1, ""); len(page["orders"].([]any)) != 1 {
		t.Fatalf("a page inside the window: %v", page)
	}
	h.fails("GET", "/api/v1/orders?status=all&limit=100", u1, "", 503, CodeNotPrimary)
	h.fails("GET", "/api/v1/my-trades?limit=100", u1, "", 503, CodeNotPrimary)
	b := h.ok("GET", "/api/v1/balances", u1, "")
	if b["funding_error"] != CodeNotPrimary {
		t.Fatalf("balances on the standby: %v", b)
	}
	for _, x := range b["balances"].([]any) {
		if f, ok := x.(map[string]any)["funding"]; !ok || f != nil {
			t.Fatalf("balances on the standby: %v", b)
		}
	}
	rep.primary.Store(true) // the primary without Postgres lists what History holds, as before
	if page := h.ok("GET", "/api/v1/orders?status=all&limit=100", u1, ""); len(page["orders"].([]any)) == 0 {
		t.Fatalf("the primary's page: %v", page)
	}
	if b := h.ok("GET", "/api/v1/balances", u1, ""); b["funding_error"] != nil {
		t.Fatalf("balances on the primary: %v", b)
	}

	// A standby whose History saw the venue from seq 1, nothing evicted:
	// its history is complete, a short page is the whole history.
	rep2 := &fakeReplica{}
	rep2.primary.Store(true)
	rep2.accepting.Store(true)
	h2 := newHarness(t, func(c *ServerConfig) { c.Replica = rep2 })
	h2.be.h.FromStart()
	h2.fund(1, "USDT", "1000000")
	o := h2.ok("POST", "/api/v1/order", h2.token(1), orderBody("price", "1"))
	rep2.primary.Store(false)
	if page := h2.ok("GET", "/api/v1/orders?status=all&limit=100", h2.token(1), ""); len(page["orders"].([]any)) != 1 {
		t.Fatalf("a complete history on the standby: %v", page)
	}
	h2.ok("GET", "/api/v1/order/"+itoa(int64(num(t, o["order_id"]))), h2.token(1), "")
	h2.fails("GET", "/api/v1/order/999999", h2.token(1), "", 404, CodeOrderNotFound)
	if page := h2.ok("GET", "/api/v1/my-trades?limit=100", h2.token(1), ""); len(page["trades"].([]any)) != 0 {
		t.Fatalf("my-trades: %v", page)
	}
}
