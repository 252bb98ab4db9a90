package gateway

// These tests prove that History agrees with the core on every order it
// tracks (random command streams, seeded), that each bound holds (trades per
// market, finished orders FIFO, fills per order and in total), and that
// Seed and Partial records cover orders placed before History started.

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ubscore/ubscore/core"
)

// historyRig is a core with the default config and a History fed by it.
type historyRig struct {
	p   *core.Processor
	h   *History
	seq core.Seq
}

func newHistoryRig(t testing.TB) *historyRig {
	r := &historyRig{p: core.New(core.Config{}), h: new(History)}
	for _, c := range defaultRegistry(t).ConfigCommands() {
		r.apply(c)
	}
	return r
}

func (r *historyRig) apply(c core.Command) []core.Event {
	r.seq++
	c.Seq, c.Time = r.seq, int64(r.seq)*1_000_000
	evs := r.p.Apply(&c)
	r.h.Apply(&c, evs)
	return evs
}

// check compares History with the core for every order id issued so far.
func (r *historyRig) check(t *testing.T, maxID core.OrderID, fills map[core.OrderID]core.Units) {
	t.Helper()
	for id := core.OrderID(1); id <= maxID; id++ {
		hr, ok := r.h.Order(id)
		if !ok {
			t.Fatalf("order %d unknown to History", id)
		}
		var sum core.Units
		for _, f := range hr.Fills {
			sum += f.Qty
			if f.Maker != id && f.Taker != id {
				t.Fatalf("order %d lists a fill of others: %+v", id, f)
			}
		}
		if !hr.FillsTruncated && sum != hr.Filled {
			t.Fatalf("order %d: fills add to %d, filled %d", id, sum, hr.Filled)
		}
		if hr.Filled != fills[id] {
			t.Fatalf("order %d: History filled %d, trades say %d", id, hr.Filled, fills[id])
		}
		if o, live := r.p.Order(id); live {
			if !hr.Live() || hr.Filled != o.Filled || hr.Price != o.Price || hr.Qty != o.Qty ||
				hr.ClientID != o.ClientID || hr.User != o.User || hr.Side != o.Side || hr.TIF != o.TIF {
				t.Fatalf("live order %d: core %+v, History %+v", id, o, hr)
			}
			continue
		}
		switch hr.Status {
		case core.StatusFilled:
			if hr.QuoteQty == 0 && hr.Filled != hr.Qty {
				t.Fatalf("filled order %d: filled %d of %d", id, hr.Filled, hr.Qty)
			}
		case core.StatusCancelled, core.StatusExpired:
			if hr.QuoteQty == 0 && hr.Filled >= hr.Qty {
				t.Fatalf("%v order %d fully filled", hr.Status, id)
			}
		default:
			t.Fatalf("order %d gone from the core but %v in History", id, hr.Status)
		}
	}
}

func TestHistoryAgreesWithCore(t *testing.T) {
	s := seed(t)
	rng := rand.New(rand.NewPCG(s, s>>1))
	r := newHistoryRig(t)
	for u := core.UserID(1); u <= 6; u++ {
		for a := core.AssetID(1); a <= 3; a++ {
			r.apply(core.Command{Kind: core.KindAdjust, User: u, Asset: a, Amount: 1 << 50,
				Key: core.Key{byte(u), byte(a), 'f'}})
		}
	}
	fills := map[core.OrderID]core.Units{} // filled per order, from the trade events
	var maxID core.OrderID
	var tradesSeen int
	for i := range 20_000 {
		c := randomCommand(rng, maxID)
		evs := r.apply(c)
		for _, e := range evs {
			if e.Kind == core.EvTrade {
				fills[e.OrderID] += e.Qty
				fills[e.OtherOrderID] += e.Qty
				tradesSeen++
			}
		}
		if res := evs[len(evs)-1]; c.Kind == core.KindPlaceOrder && res.Code == core.OK {
			maxID = res.OrderID
		}
		if i%2_000 == 0 {
			r.check(t, maxID, fills)
		}
	}
	r.check(t, maxID, fills)
	t.Logf("%d orders, %d trades, History %+v", maxID, tradesSeen, r.h.Stats())
	if tradesSeen == 0 || maxID < 1_000 {
		t.Fatalf("the stream was too quiet: %d trades, %d orders", tradesSeen, maxID)
	}
	// Recent trades are the last ones, newest first.
	got := r.h.Trades(1, MaxTradesPerMarket+1, nil)
	for i := 1; i < len(got); i++ {
		if got[i].ID >= got[i-1].ID {
			t.Fatalf("trades not newest first: %d then %d", got[i-1].ID, got[i].ID)
		}
	}
}

// randomCommand is a place (mostly near the mid, every type), cancel or
// modify on a small random book of 6 users, 2 markets.
func randomCommand(rng *rand.Rand, maxID core.OrderID) core.Command {
	user := core.UserID(1 + rng.IntN(6))
	mkt := core.MarketID(1 + rng.IntN(2))
	switch k := rng.IntN(10); {
	case k < 2 && maxID > 0:
		return core.Command{Kind: core.KindCancelOrder, User: user, OrderID: core.OrderID(1 + rng.Int64N(int64(maxID)))}
	case k < 3 && maxID > 0:
		return core.Command{Kind: core.KindModifyOrder, User: user, OrderID: core.OrderID(1 + rng.Int64N(int64(maxID))),
			Price: core.Price(rng.Int64N(3)) * (4990_000000 + core.Price(rng.IntN(20))*10_000),
			Qty:   core.Units(rng.Int64N(3)) * core.Units(1+rng.IntN(20)) * 10_000}
	}
	c := core.Command{Kind: core.KindPlaceOrder, User: user, Market: mkt, Side: core.Side(1 + rng.IntN(2)),
		Type: core.Limit, TIF: core.TimeInForce(1 + rng.IntN(4)),
		Price: 4990_000000 + core.Price(rng.IntN(20))*10_000, Qty: core.Units(1+rng.IntN(50)) * 10_000}
	if rng.IntN(4) == 0 {
		c.Key = core.Key{'c', byte(rng.IntN(8))}
	}
	if rng.IntN(8) == 0 {
		c.Type, c.TIF, c.Price = core.Market, 0, 0
		if c.Side == core.Buy && rng.IntN(2) == 0 {
			c.Qty, c.QuoteQty = 0, core.Units(1+rng.IntN(1000))*1_000_000
		}
	}
	return c
}

func TestHistoryTradeRing(t *testing.T) {
	h := new(History)
	n := MaxTradesPerMarket + 500
	for i := 1; i <= n; i++ {
		c := core.Command{Kind: core.KindTick}
		h.Apply(&c, []core.Event{{Kind: core.EvTrade, Market: 2, TradeID: uint64(i), Price: 1, Qty: 1},
			{Kind: core.EvResult}})
	}
	got := h.Trades(2, n, nil)
	if len(got) != MaxTradesPerMarket || got[0].ID != uint64(n) || got[len(got)-1].ID != uint64(n-MaxTradesPerMarket+1) {
		t.Fatalf("ring: %d trades, first %d, last %d", len(got), got[0].ID, got[len(got)-1].ID)
	}
	if got := h.Trades(2, 3, nil); len(got) != 3 || got[2].ID != uint64(n-2) {
		t.Fatalf("limit 3: %+v", got)
	}
	if got := h.Trades(1, 10, nil); len(got) != 0 {
		t.Fatalf("a market without trades: %+v", got)
	}
	if got := h.Trades(core.MaxMarkets+5, 10, nil); len(got) != 0 {
		t.Fatalf("an out-of-range market: %+v", got)
	}
}

// place applies a synthetic placement of order id that rests.
func place(h *History, id core.OrderID) {
	c := core.Command{Kind: core.KindPlaceOrder, User: 9, Market: 1, Side: core.Sell, Type: core.Limit,
		TIF: core.GTC, Price: 100, Qty: 1_000_000}
	h.Apply(&c, []core.Event{{Kind: core.EvResult, Code: core.OK, OrderID: id, Status: core.StatusNew}})
}

func cancel(h *History, id core.OrderID) {
	c := core.Command{Kind: core.KindCancelOrder, User: 9, OrderID: id}
	h.Apply(&c, []core.Event{{Kind: core.EvOrderCancelled, OrderID: id, User: 9, Market: 1},
		{Kind: core.EvResult, Code: core.OK, OrderID: id}})
}

// trade applies n synthetic fills of maker id (against an untracked taker).
func trade(h *History, id core.OrderID, n int) {
	c := core.Command{Kind: core.KindPlaceOrder}
	evs := make([]core.Event, 0, n+1)
	for range n {
		evs = append(evs, core.Event{Kind: core.EvTrade, Market: 1, OrderID: id, OtherOrderID: 1 << 40, Price: 100, Qty: 1})
	}
	h.Apply(&c, append(evs, core.Event{Kind: core.EvResult, Code: core.CodeInvalidCommand}))
}

func TestHistoryFinishedFIFO(t *testing.T) {
	h := new(History)
	n := core.OrderID(MaxFinishedOrders + 10)
	for id := core.OrderID(1); id <= n; id++ {
		place(h, id)
		cancel(h, id)
	}
	if st := h.Stats(); st.FinishedOrders != MaxFinishedOrders || st.LiveOrders != 0 {
		t.Fatalf("stats %+v", st)
	}
	for id := core.OrderID(1); id <= 10; id++ {
		if _, ok := h.Order(id); ok {
			t.Fatalf("order %d should have been evicted", id)
		}
	}
	if r, ok := h.Order(11); !ok || r.Status != core.StatusCancelled || r.Partial {
		t.Fatalf("order 11: %+v %v", r, ok)
	}
	if len(h.recs) > MaxFinishedOrders+1 || len(h.done)-h.doneH != MaxFinishedOrders || len(h.done) > 2*MaxFinishedOrders {
		t.Fatalf("storage not bounded: recs %d, queue %d (head %d)", len(h.recs), len(h.done), h.doneH)
	}
}

func TestHistoryFillBounds(t *testing.T) {
	h := new(History)
	place(h, 1)
	trade(h, 1, MaxFillsPerOrder+5)
	r, _ := h.Order(1)
	if len(r.Fills) != MaxFillsPerOrder || !r.FillsTruncated || r.Filled != MaxFillsPerOrder+5 {
		t.Fatalf("per-order cap: %d fills, truncated %v, filled %d", len(r.Fills), r.FillsTruncated, r.Filled)
	}
	if testing.Short() {
		t.Skip("the global fill budget needs ~1.5M fills")
	}
	// Finished orders holding half the budget, then live ones needing more:
	// the oldest finished orders make room, live orders keep every fill.
	h = new(History)
	per := MaxFillsPerOrder
	nFinished := MaxRetainedFills / 2 / per
	id := core.OrderID(0)
	for range nFinished {
		id++
		place(h, id)
		trade(h, id, per)
		cancel(h, id)
	}
	nLive := MaxRetainedFills*6/10/per + 1
	firstLive := id + 1
	for range nLive {
		id++
		place(h, id)
		trade(h, id, per)
	}
	st := h.Stats()
	if st.Fills > MaxRetainedFills || st.LiveOrders != nLive || st.FinishedOrders >= nFinished {
		t.Fatalf("after live fills: %+v", st)
	}
	for lid := firstLive; lid <= id; lid++ {
		if r, _ := h.Order(lid); len(r.Fills) != per || r.FillsTruncated {
			t.Fatalf("live order %d lost fills: %d", lid, len(r.Fills))
		}
	}
	if _, ok := h.Order(1); ok {
		t.Fatal("the oldest finished order was kept")
	}
	// With no finished orders left to evict, a live order's new fills are counted but not listed.
	for range st.FinishedOrders + 2 {
		id++
		place(h, id)
		trade(h, id, per)
	}
	if st := h.Stats(); st.Fills > MaxRetainedFills || st.FinishedOrders != 0 {
		t.Fatalf("at the budget: %+v", st)
	}
	if r, _ := h.Order(id); !r.FillsTruncated || r.Filled != core.Units(per) || len(r.Fills) == per {
		t.Fatalf("a fill over the budget: %d listed, truncated %v", len(r.Fills), r.FillsTruncated)
	}
}

func TestHistorySeedAndPartial(t *testing.T) {
	r := newHistoryRig(t)
	r.apply(core.Command{Kind: core.KindAdjust, User: 1, Asset: btc, Amount: 1e8, Key: core.Key{'a'}})
	r.apply(core.Command{Kind: core.KindAdjust, User: 2, Asset: usdt, Amount: 1e12, Key: core.Key{'b'}})
	r.apply(core.Command{Kind: core.KindPlaceOrder, User: 1, Market: 1, Side: core.Sell, Type: core.Limit, TIF: core.GTC,
		Price: 5000_000000, Qty: 2_000_000, Key: core.Key{'k'}})
	r.apply(core.Command{Kind: core.KindPlaceOrder, User: 1, Market: 1, Side: core.Sell, Type: core.Limit, TIF: core.GTC,
		Price: 5100_000000, Qty: 1_000_000})
	r.apply(core.Command{Kind: core.KindPlaceOrder, User: 2, Market: 1, Side: core.Buy, Type: core.Limit, TIF: core.IOC,
		Price: 5000_000000, Qty: 500_000})

	// A History that starts now (after a restart) and is seeded.
	r.h = new(History)
	r.h.Seed(r.p)
	r.h.Seed(r.p) // idempotent
	if st := r.h.Stats(); st.LiveOrders != 2 {
		t.Fatalf("seeded %+v", st)
	}
	o1, ok := r.h.Order(1)
	if !ok || o1.Filled != 500_000 || o1.Status != core.StatusPartiallyFilled || !o1.FillsTruncated ||
		o1.ClientID != (core.Key{'k'}) || o1.Partial {
		t.Fatalf("seeded order 1: %+v", o1)
	}
	r.apply(core.Command{Kind: core.KindCancelOrder, User: 1, OrderID: 1})
	if o1, _ = r.h.Order(1); o1.Status != core.StatusCancelled || o1.Partial || o1.Price != 5000_000000 {
		t.Fatalf("cancelled seeded order: %+v", o1)
	}
	// Without Seed, an order finishing is remembered Partial, from its event.
	r.h = new(History)
	r.apply(core.Command{Kind: core.KindCancelOrder, User: 1, OrderID: 2})
	o2, ok := r.h.Order(2)
	if !ok || !o2.Partial || o2.Status != core.StatusCancelled || o2.User != 1 || o2.Market != 1 || o2.Side != core.Sell {
		t.Fatalf("partial order 2: %+v", o2)
	}
	// A duplicate or rejected placement records nothing.
	before := r.h.Stats()
	r.apply(core.Command{Kind: core.KindPlaceOrder, User: 9, Market: 1, Side: core.Buy, Type: core.Limit, TIF: core.GTC,
		Price: 5000_000000, Qty: 10_000})
	if r.h.Stats() != before {
		t.Fatal("a rejected order was recorded")
	}
}

// TestHistoryUserIndexAndFloors: on a random stream with a small window,
// each user's list holds exactly their records, the orders History saw
// placed in descending id order, and every order (trade) of a user at or
// above the floor is there; the floors only rise.
func TestHistoryUserIndexAndFloors(t *testing.T) {
	s := seed(t)
	rng := rand.New(rand.NewPCG(s, s>>2))
	r := newHistoryRig(t)
	r.h.Window = 50
	for u := core.UserID(1); u <= 6; u++ {
		for a := core.AssetID(1); a <= 3; a++ {
			r.apply(core.Command{Kind: core.KindAdjust, User: u, Asset: a, Amount: 1 << 50, Key: core.Key{byte(u), byte(a), 'f'}})
		}
	}
	orders := map[core.UserID][]core.OrderID{} // every order placed, by user, in id order
	trades := map[core.UserID][]uint64{}       // every trade, by user (once per trade), in id order
	var maxID core.OrderID
	var last Floor
	check := func() {
		t.Helper()
		fl := r.h.Floors()
		if (fl.Order < last.Order && last.Order != core.OrderID(NoFloor)) || (fl.Trade < last.Trade && last.Trade != NoFloor) ||
			fl.OrderSeq < last.OrderSeq || fl.TradeSeq < last.TradeSeq {
			t.Fatalf("floors went down: %+v -> %+v", last, fl)
		}
		last = fl
		total := 0
		for u := core.UserID(1); u <= 6; u++ {
			var got []core.OrderID
			prev := core.OrderID(1<<63 - 1)
			r.h.UserOrders(u, func(rec *OrderRecord) bool {
				total++
				if rec.User != u {
					t.Fatalf("user %d's list holds order %d of user %d", u, rec.ID, rec.User)
				}
				if rec.ID >= fl.Order {
					if rec.ID >= prev || rec.Partial || rec.Time == 0 {
						t.Fatalf("user %d: order %d after %d (partial %v, time %d)", u, rec.ID, prev, rec.Partial, rec.Time)
					}
					prev = rec.ID
					got = append(got, rec.ID)
				}
				return true
			})
			var want []core.OrderID
			for i := len(orders[u]) - 1; i >= 0 && orders[u][i] >= fl.Order; i-- {
				want = append(want, orders[u][i])
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("user %d above floor %d:\n got %v\nwant %v", u, fl.Order, got, want)
			}
			var gotT []uint64
			r.h.UserTrades(u, func(tr *UserTrade) bool {
				if tr.MakerUser != u && tr.TakerUser != u {
					t.Fatalf("user %d's trades hold %+v", u, tr)
				}
				gotT = append(gotT, tr.ID)
				return true
			})
			var wantT []uint64
			for i := len(trades[u]) - 1; i >= 0 && trades[u][i] >= fl.Trade; i-- {
				wantT = append(wantT, trades[u][i])
			}
			if fmt.Sprint(gotT) != fmt.Sprint(wantT) {
				t.Fatalf("user %d trades above floor %d:\n got %v\nwant %v", u, fl.Trade, gotT, wantT)
			}
		}
		st := r.h.Stats()
		if total != st.LiveOrders+st.FinishedOrders {
			t.Fatalf("the user lists hold %d records, History %+v", total, st)
		}
	}
	for i := range 20_000 {
		c := randomCommand(rng, maxID)
		evs := r.apply(c)
		for _, e := range evs {
			if e.Kind == core.EvTrade {
				trades[e.User] = append(trades[e.User], e.TradeID)
				if e.OtherUser != e.User {
					trades[e.OtherUser] = append(trades[e.OtherUser], e.TradeID)
				}
			}
		}
		if res := evs[len(evs)-1]; c.Kind == core.KindPlaceOrder && res.Code == core.OK && res.OrderID != 0 {
			maxID = res.OrderID
			orders[c.User] = append(orders[c.User], res.OrderID)
		}
		if i%500 == 0 {
			check()
		}
	}
	check()
	if last.Order < 100 || last.Trade < 100 {
		t.Fatalf("the window never moved the floors: %+v", last)
	}
}
