package gateway

import (
	"testing"
	"time"
)

// An order below History's floor is read from the archive only once the
// archive has persisted the seq the floor reports (the rule of
// history_user.go): before that, its absence there proves nothing — the
// order exists, the sink is behind (after a restart, a finished order
// History never saw placed). GET, DELETE and PATCH of such an order answer
// 503 (retry), never 404 ORDER_NOT_FOUND; once the archive catches up they
// answer it as usual. (Found by the crash soak: a PATCH answered 404 for an
// order the ledger holds.)
func TestOrderBelowTheFloorWaitsForTheArchive(t *testing.T) {
	arch := &lagArchive{h: History{Window: MaxFinishedOrders}}
	h := newHarness(t, func(c *ServerConfig) { c.Archive = arch })
	h.be.h.Window = 2 // finished orders kept in memory
	h.be.tap = arch.tap
	h.srv.archiveWait = 50 * time.Millisecond
	h.fund(1, "BTC", "10")
	u1 := h.token(1)
	arch.setHold(true) // the sink stops persisting

	var first string
	var firstID uint64
	for i := range 6 { // placed and cancelled: the first is evicted from History
		o := h.ok("POST", "/api/v1/order", u1, orderBody("side", "SELL", "price", "60000", "quantity", "0.01"))
		id := itoa(int64(num(t, o["order_id"])))
		h.ok("DELETE", "/api/v1/order/"+id, u1, "")
		if i == 0 {
			first, firstID = id, num(t, o["order_id"])
		}
	}
	if fl := h.be.h.Floors(); uint64(fl.Order) <= firstID {
		t.Fatalf("floors %+v: the first order %s is still in History", fl, first)
	}
	h.fails("GET", "/api/v1/order/"+first, u1, "", 503, CodeServiceUnavailable)
	h.fails("DELETE", "/api/v1/order/"+first, u1, "", 503, CodeServiceUnavailable)
	h.fails("PATCH", "/api/v1/order/"+first, u1, `{"quantity":"0.005"}`, 503, CodeServiceUnavailable)

	arch.setHold(false) // caught up
	if g := h.ok("GET", "/api/v1/order/"+first, u1, ""); g["status"] != "CANCELLED" {
		t.Fatalf("GET after the archive caught up: %v", g)
	}
	h.fails("DELETE", "/api/v1/order/"+first, u1, "", 409, CodeOrderNotOpen)
	h.fails("PATCH", "/api/v1/order/"+first, u1, `{"quantity":"0.005"}`, 409, CodeOrderNotOpen)
	h.fails("GET", "/api/v1/order/"+first, h.token(2), "", 404, CodeOrderNotFound) // another user's: not found
}
