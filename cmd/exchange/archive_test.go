package main

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
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
	a := &pgArchive{pool: pool, timeout: 5 * time.Second, ready: &migrated}
	if _, _, err := a.Order(1); err == nil {
		t.Fatal("the archive answered before the migrations ran")
	}
	if err := persist.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	migrated.Store(true)

	var cfg Config
	cfg.Assets, cfg.Markets = defaultInstruments()
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
	for _, c := range cfg.ConfigCommands() {
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

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
