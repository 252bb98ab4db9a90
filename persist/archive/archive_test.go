package archive

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/instruments"
	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/pgtest"
)

// TestPGArchiveOrder: the Postgres fallback of GET /order answers a
// finished order with its fields and fills exactly as the sink wrote them,
// refuses before the migrations ran, and says "not found" for an unknown id.
func TestPGArchiveOrder(t *testing.T) {
	url := pgtest.NewDB(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var migrated atomic.Bool
	a := &Archive{Pool: pool, Timeout: 5 * time.Second, Ready: &migrated}
	if _, _, err := a.Order(1); err == nil {
		t.Fatal("the archive answered before the migrations ran")
	}
	if err := persist.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	migrated.Store(true)

	p := core.New(core.Config{})
	var recs []persist.Record
	seq := core.Seq(0)
	apply := func(c core.Command) []core.Event {
		seq++
		c.Seq, c.Time = seq, int64(seq)*1_000_000
		evs := append([]core.Event(nil), p.Apply(&c)...)
		recs = append(recs, persist.Record{Cmd: c, Events: evs})
		return evs
	}
	for _, c := range instruments.Default().Commands() {
		apply(c)
	}
	k := func(s string) core.Key { key, _ := core.KeyFrom(s); return key }
	apply(core.Command{Kind: core.KindAdjust, User: 1, Asset: 2, Amount: 1_0000_0000, Key: k("a1")})
	apply(core.Command{Kind: core.KindAdjust, User: 2, Asset: 1, Amount: 1_000_000_000_000, Key: k("a2")})
	sell := apply(core.Command{Kind: core.KindPlaceOrder, User: 1, Market: 1, Side: core.Sell, Type: core.Limit, TIF: core.GTC,
		Price: 50_000_000_000, Qty: 5000_0000, Key: k("s1")})
	sellID := sell[len(sell)-1].OrderID
	apply(core.Command{Kind: core.KindPlaceOrder, User: 2, Market: 1, Side: core.Buy, Type: core.Limit, TIF: core.IOC,
		Price: 50_000_000_000, Qty: 2000_0000})
	apply(core.Command{Kind: core.KindPlaceOrder, User: 2, Market: 1, Side: core.Buy, Type: core.Limit, TIF: core.IOC,
		Price: 50_000_000_000, Qty: 3000_0000})
	if err := persist.NewSink(pool, persist.Options{}).WriteBatch(ctx, recs); err != nil {
		t.Fatal(err)
	}
	rec, ok, err := a.Order(sellID)
	if err != nil || !ok {
		t.Fatalf("archive order %d: %v %v", sellID, ok, err)
	}
	if rec.User != 1 || rec.Side != core.Sell || rec.Type != core.Limit || rec.TIF != core.GTC ||
		rec.Status != core.StatusFilled || rec.Price != 50_000_000_000 || rec.Qty != 5000_0000 ||
		rec.Filled != 5000_0000 || rec.ClientID != k("s1") || len(rec.Fills) != 2 {
		t.Fatalf("archive record %+v", rec)
	}
	for i, want := range []core.Units{2000_0000, 3000_0000} {
		f := rec.Fills[i]
		// maker fee 0.1% of 50000 x qty, in USDT units
		fee := core.Units(int64(want) * 50_000 / 1_0000_0000 * 1_000_000 / 1000)
		if f.Qty != want || f.Price != 50_000_000_000 || f.Maker != sellID || f.Fee != fee {
			t.Fatalf("fill %d: %+v (want qty %d fee %d)", i, f, want, fee)
		}
	}
	if _, ok, err := a.Order(999_999); ok || err != nil {
		t.Fatalf("unknown order: %v %v", ok, err)
	}
}

// TestPGArchiveBinaryHistory (issue 40 item 6): past the server's memory the
// order history and my-trades of a binary market come from the sink's rows:
// an order with its outcome and its own side and price (BUY NO @0.30, not
// the book's SELL @0.70), a fill with each party's outcome and own price.
func TestPGArchiveBinaryHistory(t *testing.T) {
	url := pgtest.NewDB(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := persist.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var migrated atomic.Bool
	migrated.Store(true)
	a := &Archive{Pool: pool, Timeout: 5 * time.Second, Ready: &migrated}

	p := core.New(core.Config{})
	var recs []persist.Record
	seq := core.Seq(0)
	apply := func(c core.Command) core.Event {
		seq++
		c.Seq, c.Time = seq, int64(seq)*1_000_000
		evs := append([]core.Event(nil), p.Apply(&c)...)
		recs = append(recs, persist.Record{Cmd: c, Events: evs})
		if res := evs[len(evs)-1]; res.Code != core.OK {
			t.Fatalf("%s: %s", c.Kind, res.Code)
		}
		return evs[len(evs)-1]
	}
	for _, c := range instruments.Default().Commands() {
		apply(c)
	}
	k := func(s string) core.Key { key, _ := core.KeyFrom(s); return key }
	for u := core.UserID(1); u <= 2; u++ {
		apply(core.Command{Kind: core.KindAdjust, User: u, Asset: 1, Amount: 1_000_000_000, Key: k(fmt.Sprintf("a%d", u))})
	}
	apply(core.Command{Kind: core.KindConfigBinary, Market: 7, Cfg: core.MarketCfg{Quote: 1, Lot: 1, MinQty: 1,
		MaxQty: 1000}, Text: "Seven?"})
	apply(core.Command{Kind: core.KindActivate, Market: 7})
	place := func(u core.UserID, side core.Side, out core.Outcome, price core.Price, qty core.Units) core.OrderID {
		return apply(core.Command{Kind: core.KindPlaceOrder, User: u, Market: 7, Side: side, Type: core.Limit,
			TIF: core.GTC, Price: price, Qty: qty, Flags: uint8(out)}).OrderID
	}
	no := place(1, core.Buy, core.OutcomeNo, 300_000, 10)  // rests as book SELL @0.70
	yes := place(2, core.Buy, core.OutcomeYes, 700_000, 4) // mints 4 against it
	if err := persist.NewSink(pool, persist.Options{}).WriteBatch(ctx, recs); err != nil {
		t.Fatal(err)
	}
	orders, err := a.Orders(gateway.HistoryQuery{User: 1, Before: gateway.NoFloor, Limit: 10}, nil)
	if err != nil || len(orders) != 1 {
		t.Fatalf("orders: %v %+v", err, orders)
	}
	if o := orders[0]; o.ID != no || o.Outcome != core.OutcomeNo || o.Side != core.Buy || o.Price != 300_000 ||
		o.Qty != 10 || o.Filled != 4 || o.Status != core.StatusPartiallyFilled {
		t.Fatalf("archived BUY NO @0.30: %+v", o)
	}
	for _, u := range []core.UserID{1, 2} {
		trades, err := a.Trades(gateway.HistoryQuery{User: u, Before: gateway.NoFloor, Limit: 10}, nil)
		if err != nil || len(trades) != 1 {
			t.Fatalf("trades of %d: %v %+v", u, err, trades)
		}
		tr := trades[0]
		if tr.MakerOrder != no || tr.TakerOrder != yes || tr.MakerOutcome != core.OutcomeNo ||
			tr.TakerOutcome != core.OutcomeYes || tr.MakerPrice != 300_000 || tr.TakerPrice != 700_000 ||
			tr.Price != 700_000 || tr.MakerSide() != core.Buy || tr.TakerSide != core.Buy {
			t.Fatalf("archived mint: %+v", tr)
		}
	}
}
