package gateway

// The order history (GET /orders?status=...) and my-trades against a
// History whose window is tiny, beside an archive that is a complete
// History fed up to a "persisted" seq (a Postgres read model with a lag):
// every order and trade is listed exactly once, newest first, across pages
// that cross from memory into the archive; filters hold; a page within
// memory answers whatever the archive's lag, a page below the floor waits
// for the archive and says 503 when it does not catch up.

import (
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

// lagArchive is an OrderArchive over a History that keeps everything, fed
// the commands up to persisted.
type lagArchive struct {
	mu        sync.Mutex
	h         History
	queue     []archived
	persisted core.Seq
	hold      bool // stop persisting
}

type archived struct {
	c   core.Command
	evs []core.Event
}

func (a *lagArchive) tap(c *core.Command, evs []core.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.queue = append(a.queue, archived{*c, append([]core.Event(nil), evs...)})
	if !a.hold {
		a.flushLocked()
	}
}

func (a *lagArchive) flushLocked() {
	for _, r := range a.queue {
		a.h.Apply(&r.c, r.evs)
		a.persisted = r.c.Seq
	}
	a.queue = a.queue[:0]
}

func (a *lagArchive) setHold(hold bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hold = hold
	if !hold {
		a.flushLocked()
	}
}

func (a *lagArchive) Order(id core.OrderID) (OrderRecord, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.h.Order(id)
	r.Fills = append([]Fill(nil), r.Fills...)
	return r, ok, nil
}

func (a *lagArchive) PersistedSeq() core.Seq {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.persisted
}

func (a *lagArchive) Orders(q HistoryQuery, dst []OrderRecord) ([]OrderRecord, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var all []OrderRecord
	a.h.UserOrders(q.User, func(r *OrderRecord) bool {
		if uint64(r.ID) < q.Before && q.matchOrder(r) {
			rr := *r
			rr.Fills = nil
			all = append(all, rr)
		}
		return true
	})
	slices.SortFunc(all, func(x, y OrderRecord) int { return cmpDesc(uint64(x.ID), uint64(y.ID)) })
	return append(dst, all[:min(len(all), q.Limit)]...), nil
}

func (a *lagArchive) Trades(q HistoryQuery, dst []UserTrade) ([]UserTrade, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	a.h.UserTrades(q.User, func(t *UserTrade) bool {
		if t.ID < q.Before && (q.Market == 0 || t.Market == q.Market) && q.inTime(t.Time) {
			dst = append(dst, *t)
			n++
		}
		return n < q.Limit
	})
	return dst, nil
}

// listAll follows next_cursor through every page of path (a query string
// without cursor) and returns the items in order.
func (h *harness) listAll(path, key, tok string, limit int) []map[string]any {
	h.t.Helper()
	var out []map[string]any
	cursor := ""
	for pages := 0; ; pages++ {
		p := fmt.Sprintf("%s&limit=%d", path, limit)
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		page := h.ok("GET", p, tok, "")
		items := list(h.t, page[key])
		for _, it := range items {
			out = append(out, it.(map[string]any))
		}
		if len(items) > limit {
			h.t.Fatalf("%s: %d items on a page of %d", p, len(items), limit)
		}
		c, _ := page["next_cursor"].(string)
		if c == "" {
			return out
		}
		if len(items) != limit || pages > 1000 {
			h.t.Fatalf("%s: next_cursor %q on a page of %d/%d", p, c, len(items), limit)
		}
		cursor = c
	}
}

func TestOrderHistoryAndMyTrades(t *testing.T) {
	arch := &lagArchive{h: History{Window: MaxFinishedOrders}}
	h := newHarness(t, func(c *ServerConfig) { c.Archive = arch })
	h.be.h.Window = 4 // finished orders and trades kept in memory: most of the history is the archive's
	h.be.tap = arch.tap
	h.srv.archiveWait = 50 * time.Millisecond
	for _, u := range []uint64{1, 2} {
		for _, a := range []string{"BTC", "ETH"} {
			h.fund(u, a, "10")
		}
		h.fund(u, "USDT", "1000000")
	}
	u1, u2 := h.token(1), h.token(2)

	// User 1 places 30 orders: some filled by user 2, some cancelled,
	// some expired (IOC), some left open, on both markets.
	type placed struct {
		id     uint64
		status string
		market string
		time   uint64 // ms
	}
	var ids []uint64
	for i := range 30 {
		market := "BTC-USDT"
		if i%5 == 4 {
			market = "ETH-USDT"
		}
		o := h.ok("POST", "/api/v1/order", u1, orderBody("market", market, "side", "SELL", "price", fmt.Sprint(50000+i), "quantity", "0.01"))
		ids = append(ids, num(t, o["order_id"]))
		switch i % 4 {
		case 0: // a fill by user 2 (of user 1's best ask)
			h.ok("POST", "/api/v1/order", u2, orderBody("market", market, "side", "BUY", "price", fmt.Sprint(50000+i), "quantity", "0.01"))
		case 1:
			h.ok("DELETE", "/api/v1/order/"+itoa(int64(ids[len(ids)-1])), u1, "")
		case 2: // an IOC that finds nothing: expired
			o = h.ok("POST", "/api/v1/order", u1, orderBody("market", market, "side", "BUY", "price", "1", "quantity", "0.01",
				"time_in_force", "IOC"))
			ids = append(ids, num(t, o["order_id"]))
		}
	}
	var mine []placed
	for _, id := range ids {
		g := h.ok("GET", "/api/v1/order/"+itoa(int64(id)), u1, "")
		mine = append(mine, placed{id, g["status"].(string), g["market"].(string), num(t, g["time"])})
	}
	slices.SortFunc(mine, func(a, b placed) int { return cmpDesc(a.id, b.id) })
	if fl := h.be.h.Floors(); uint64(fl.Order) <= mine[len(mine)-1].id+10 || fl.Trade <= 2 {
		t.Fatalf("floors %+v: the window did not push the history into the archive", fl)
	}

	check := func(what, query string, want func(p placed) bool) {
		t.Helper()
		var ids []uint64
		for _, p := range mine {
			if want(p) {
				ids = append(ids, p.id)
			}
		}
		for _, limit := range []int{1, 3, 7, 100} {
			got := h.listAll("/api/v1/orders?"+query, "orders", u1, limit)
			var gotIDs []uint64
			for _, o := range got {
				gotIDs = append(gotIDs, num(t, o["order_id"]))
			}
			if !slices.Equal(gotIDs, ids) {
				t.Fatalf("%s (limit %d):\n got %v\nwant %v", what, limit, gotIDs, ids)
			}
		}
	}
	isOpen := func(p placed) bool { return p.status == "NEW" || p.status == "PARTIALLY_FILLED" }
	check("all", "status=all", func(placed) bool { return true })
	check("filled", "status=filled", func(p placed) bool { return p.status == "FILLED" })
	check("cancelled", "status=cancelled", func(p placed) bool { return p.status == "CANCELLED" })
	check("expired", "status=EXPIRED", func(p placed) bool { return p.status == "EXPIRED" })
	check("open (default)", "x=1", isOpen)
	check("open ETH", "status=open&market=ETH-USDT", func(p placed) bool { return isOpen(p) && p.market == "ETH-USDT" })
	check("all ETH", "status=all&market=ETH-USDT", func(p placed) bool { return p.market == "ETH-USDT" })
	from, to := mine[20].time, mine[5].time // placement times of two orders, in ms
	check("time range", fmt.Sprintf("status=all&start_time=%d&end_time=%d", from, to),
		func(p placed) bool { return p.time >= from && p.time <= to })

	// Every listed order answers as GET shows it.
	for _, o := range h.listAll("/api/v1/orders?status=all", "orders", u1, 8) {
		g := h.ok("GET", "/api/v1/order/"+itoa(int64(num(t, o["order_id"]))), u1, "")
		for _, k := range []string{"status", "filled_quantity", "price", "quantity", "side", "market", "time", "client_order_id"} {
			if fmt.Sprint(g[k]) != fmt.Sprint(o[k]) {
				t.Fatalf("order %v: listed %s %v, GET %v", o["order_id"], k, o[k], g[k])
			}
		}
	}
	// Another user sees none of them.
	for _, o := range h.listAll("/api/v1/orders?status=all", "orders", h.token(3), 5) {
		t.Fatalf("user 3 lists %v", o)
	}

	// my-trades: user 1's fills as maker (user 2 took them), newest first.
	trades := h.listAll("/api/v1/my-trades?market=BTC-USDT", "trades", u1, 2)
	var filledBTC []uint64
	for _, p := range mine {
		if p.status == "FILLED" && p.market == "BTC-USDT" {
			filledBTC = append(filledBTC, p.id)
		}
	}
	if len(trades) != len(filledBTC) {
		t.Fatalf("%d trades, want %d: %v", len(trades), len(filledBTC), trades)
	}
	for i, tr := range trades {
		if num(t, tr["order_id"]) != filledBTC[i] || tr["is_maker"] != true || tr["side"] != "SELL" ||
			tr["quantity"] != "0.01000000" || tr["fee_asset"] != "USDT" || tr["market"] != "BTC-USDT" {
			t.Fatalf("trade %d: %v (want order %d)", i, tr, filledBTC[i])
		}
		if i > 0 && num(t, tr["trade_id"]) >= num(t, trades[i-1]["trade_id"]) {
			t.Fatalf("trades not newest first: %v", trades)
		}
	}
	theirs := h.listAll("/api/v1/my-trades?x=1", "trades", u2, 3)
	if len(theirs) != len(filledBTC)+len(mine)/5/2 && len(theirs) < len(filledBTC) {
		t.Fatalf("user 2 trades: %v", theirs)
	}
	for _, tr := range theirs {
		if tr["is_maker"] != false || tr["side"] != "BUY" || tr["fee"] == "0.000000" {
			t.Fatalf("taker's view: %v", tr)
		}
	}

	// The archive stops persisting: a page within memory still lists the
	// newest orders at once (read-your-writes); a page that needs the
	// archive waits for it and then says 503, never a short list.
	arch.setHold(true)
	o := h.ok("POST", "/api/v1/order", u1, orderBody("side", "SELL", "price", "60000", "quantity", "0.01"))
	h.ok("DELETE", "/api/v1/order/"+itoa(int64(num(t, o["order_id"]))), u1, "")
	first := list(t, h.ok("GET", "/api/v1/orders?status=cancelled&limit=1", u1, "")["orders"])
	if len(first) != 1 || num(t, first[0].(map[string]any)["order_id"]) != num(t, o["order_id"]) {
		t.Fatalf("the newest cancelled order while the archive lags: %v", first)
	}
	h.fails("GET", "/api/v1/orders?status=all&limit=1000", u1, "", 503, CodeServiceUnavailable)
	arch.setHold(false)
	if all := h.listAll("/api/v1/orders?status=all", "orders", u1, 1000); len(all) != len(mine)+1 {
		t.Fatalf("after the archive caught up: %d orders, want %d", len(all), len(mine)+1)
	}
	// An old open order (below the floor) changes while the archive lags:
	// the archive's row is stale, so the page waits (503), then shows the change.
	var old uint64
	for _, p := range mine {
		if isOpen(p) && p.market == "BTC-USDT" {
			old = p.id // the oldest open one, at the end
		}
	}
	if fl := h.be.h.Floors(); old >= uint64(fl.Order) {
		t.Fatalf("order %d is not below the floor %+v", old, fl)
	}
	arch.setHold(true)
	h.ok("PATCH", "/api/v1/order/"+itoa(int64(old)), u1, `{"quantity":"0.005"}`)
	h.fails("GET", "/api/v1/orders?status=all&market=BTC-USDT&limit=1000&cursor="+itoa(int64(old+1)), u1, "", 503, CodeServiceUnavailable)
	arch.setHold(false)
	got := list(t, h.ok("GET", "/api/v1/orders?status=all&limit=1&cursor="+itoa(int64(old+1)), u1, "")["orders"])
	if len(got) != 1 || got[0].(map[string]any)["quantity"] != "0.00500000" {
		t.Fatalf("the modified old order: %v", got)
	}

	for _, bad := range []string{"status=done", "limit=0", "limit=1001", "cursor=0", "cursor=x", "start_time=-1",
		"start_time=5&end_time=4", "market=DOGE-USDT"} {
		st, _ := h.do("GET", "/api/v1/orders?"+bad, u1, "")
		if st != 400 {
			t.Fatalf("%s: %d", bad, st)
		}
	}
}

// TestOrderHistoryWithoutArchive: without an archive the history lists what
// History holds, newest first.
func TestOrderHistoryWithoutArchive(t *testing.T) {
	h := newHarness(t)
	h.fund(1, "BTC", "10")
	u1 := h.token(1)
	var ids []uint64
	for i := range 5 {
		o := h.ok("POST", "/api/v1/order", u1, orderBody("side", "SELL", "price", fmt.Sprint(50000+i), "quantity", "0.01"))
		ids = append(ids, num(t, o["order_id"]))
		if i%2 == 0 {
			h.ok("DELETE", "/api/v1/order/"+itoa(int64(ids[i])), u1, "")
		}
	}
	slices.Reverse(ids)
	var got []uint64
	for _, o := range h.listAll("/api/v1/orders?status=all", "orders", u1, 2) {
		got = append(got, num(t, o["order_id"]))
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("got %v, want %v", got, ids)
	}
}

// FuzzHistoryQuery: any values of the order history's and my-trades' query
// parameters (status, market, limit, cursor, start_time, end_time) are
// either answered 200 with at most MaxListLimit items, or refused 400
// INVALID_PARAMETER / INVALID_MARKET; never anything else.
func FuzzHistoryQuery(f *testing.F) {
	f.Add("all", "BTC-USDT", "2", "", "", "")
	f.Add("open", "", "1000", "3", "1700000000000", "1700000000001")
	f.Add("EXPIRED", "ETH-USDT", "0", "-1", "99999999999999999999", "9223372036854")
	f.Add("x", "DOGE", "1\x00", "01", " 1", "+5")
	h := newHarness(f)
	h.fund(1, "BTC", "10")
	tok := h.token(1)
	for i := range 5 {
		o := h.ok("POST", "/api/v1/order", tok, orderBody("side", "SELL", "price", fmt.Sprint(50000+i), "quantity", "0.01"))
		if i%2 == 0 {
			h.ok("DELETE", "/api/v1/order/"+itoa(int64(num(f, o["order_id"]))), tok, "")
		}
	}
	f.Fuzz(func(t *testing.T, status, market, limit, cursor, start, end string) {
		h.t = t // the harness reports on the current input
		q := url.Values{}
		for k, v := range map[string]string{"status": status, "market": market, "limit": limit, "cursor": cursor,
			"start_time": start, "end_time": end} {
			if v != "" {
				q.Set(k, v)
			}
		}
		for _, path := range []string{"/api/v1/orders?", "/api/v1/my-trades?"} {
			st, out := h.do("GET", path+q.Encode(), tok, "")
			switch st {
			case 200:
				key := "orders"
				if path == "/api/v1/my-trades?" {
					key = "trades"
				}
				if items, ok := out[key].([]any); !ok || len(items) > MaxListLimit {
					t.Fatalf("%s%s: %v", path, q.Encode(), out)
				}
			case 400:
				if c := out["code"]; c != CodeInvalidParameter && c != CodeInvalidMarket {
					t.Fatalf("%s%s: 400 %v", path, q.Encode(), out)
				}
			default:
				t.Fatalf("%s%s: %d %v", path, q.Encode(), st, out)
			}
		}
	})
}
