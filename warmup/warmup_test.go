package warmup

// The order history's warm-up at start-up (issue 39, restart at scale): a
// WAL longer than the bound is replayed from the recovery's snapshot only,
// a short one whole; the resting orders are seeded either way, and the
// floors say where History's complete part begins.

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
)

// warmupVenue writes a data dir: two filled orders (a cross) and a resting
// one, filler commands past a periodic snapshot, then the same again. It
// returns the order ids of each half and the seq of the periodic snapshot
// the second half follows.
func warmupVenue(t *testing.T, dir string) (before, after [3]core.OrderID, snapSeq core.Seq) {
	t.Helper()
	const every = 40
	pl, err := journal.Start(journal.Config{Dir: dir, ReadView: true, SnapshotEvery: every,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	do := func(c core.Command) core.Event {
		t.Helper()
		r := journal.NewReply()
		if _, err := pl.Submit(&c, r); err != nil {
			t.Fatal(err)
		}
		if err := pl.Wait(r); err != nil {
			t.Fatal(err)
		}
		res := r.Result()
		if res.Code != core.OK {
			t.Fatalf("%v: %v", c.Kind, res.Code)
		}
		return res
	}
	key := func(s string) core.Key { k, _ := core.KeyFrom(s); return k }
	do(core.Command{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 2})
	do(core.Command{Kind: core.KindConfigAsset, Asset: 2, BaseScale: 0})
	do(core.Command{Kind: core.KindConfigMarket, Market: 1, Cfg: core.MarketCfg{Base: 2, Quote: 1, Tick: 1, Lot: 1,
		MinQty: 1, MaxQty: 1000}})
	for u := core.UserID(1); u <= 2; u++ {
		do(core.Command{Kind: core.KindSpotDeposit, User: u, Asset: 1, Amount: 1_000_000, Key: key("q" + string('0'+rune(u)))})
		do(core.Command{Kind: core.KindSpotDeposit, User: u, Asset: 2, Amount: 1_000, Key: key("b" + string('0'+rune(u)))})
	}
	order := func(u core.UserID, side core.Side, price core.Price) core.OrderID {
		return do(core.Command{Kind: core.KindPlaceOrder, User: u, Market: 1, Side: side, Type: core.Limit, TIF: core.GTC,
			Price: price, Qty: 1}).OrderID
	}
	half := func() (ids [3]core.OrderID) {
		ids[0] = order(1, core.Sell, 100)
		ids[1] = order(2, core.Buy, 100)  // fills both
		ids[2] = order(1, core.Sell, 500) // rests
		return ids
	}
	before = half()
	for pl.DurableSeq() < 2*every+5 { // filler: past a periodic snapshot
		order(2, core.Buy, 1)
		do(core.Command{Kind: core.KindCancelOrder, User: 2, Market: 1, OrderID: order(2, core.Buy, 1)})
	}
	after = half()
	if err := pl.Close(); err != nil { // a final snapshot at the last seq
		t.Fatal(err)
	}
	snaps, err := journal.OpenSnapshotStore(filepath.Join(dir, journal.SnapshotDir), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	infos, err := snaps.List()
	if err != nil || len(infos) < 2 {
		t.Fatalf("snapshots %v, %v: want a periodic one and the final one", infos, err)
	}
	return before, after, core.Seq(infos[len(infos)-2].Seq)
}

// warmupRestart starts a pipeline on dir with the exchange's warm-up
// (wholeMax) and seed, and returns the History it built and the seq the
// recovery started from.
func warmupRestart(t *testing.T, dir string, wholeMax core.Seq) (*gateway.History, journal.RecoveryReport) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	hist := &gateway.History{}
	var warmErr error
	pl, err := journal.Start(journal.Config{Dir: dir, ReadView: true, Logger: log,
		WarmUp: func(pl *journal.Pipeline) error {
			warmErr = History(context.Background(), pl, hist, &gateway.BreakerLog{}, false, wholeMax, log)
			return warmErr
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if err := warmErr; err != nil {
		t.Fatal(err)
	}
	return hist, pl.Recovery()
}

func TestHistoryWarmUp(t *testing.T) {
	dir := t.TempDir()
	before, after, mid := warmupVenue(t, dir)
	has := func(h *gateway.History, id core.OrderID, st core.OrderStatus) bool {
		r, ok := h.Order(id)
		return ok && r.Status == st && !r.Partial
	}

	// A graceful stop snapshots at the last seq: from it, nothing is
	// replayed; the resting orders are seeded, finished ones are the
	// archive's (no order is known placed here: no floor).
	h, rec := warmupRestart(t, dir, 0)
	if rec.SnapshotSeq != rec.Seq {
		t.Fatalf("recovery from snapshot %d, seq %d: want the final snapshot", rec.SnapshotSeq, rec.Seq)
	}
	if !has(h, before[2], core.StatusNew) || !has(h, after[2], core.StatusNew) {
		t.Fatal("a resting order is not seeded")
	}
	if _, ok := h.Order(after[0]); ok {
		t.Fatal("a finished order before the snapshot is in History: the WAL was replayed")
	}
	// Below the floors the archive answers only once it has persisted the
	// recovered seq: History saw none of the commands before it.
	if f := h.Floors(); f.Order != core.OrderID(gateway.NoFloor) || f.OrderSeq < rec.Seq || f.TradeSeq < rec.Seq {
		t.Fatalf("floors %+v: want no order floor, the archive awaited to seq %d", f, rec.Seq)
	}

	// A crash leaves the periodic snapshot the newest: the commands after
	// it are replayed (the second half, with its fills), not those before.
	final := filepath.Join(dir, journal.SnapshotDir)
	infos, _ := os.ReadDir(final)
	if err := os.Remove(filepath.Join(final, infos[len(infos)-1].Name())); err != nil {
		t.Fatal(err)
	}
	h, rec = warmupRestart(t, dir, 0)
	if rec.SnapshotSeq != mid || rec.Seq <= mid {
		t.Fatalf("recovery from snapshot %d to seq %d: want the periodic one, %d", rec.SnapshotSeq, rec.Seq, mid)
	}
	if !has(h, after[0], core.StatusFilled) || !has(h, after[1], core.StatusFilled) || !has(h, after[2], core.StatusNew) {
		t.Fatal("an order placed after the snapshot is missing or wrong")
	}
	if r, _ := h.Order(after[1]); len(r.Fills) != 1 || r.FillsTruncated {
		t.Fatalf("the fills of an order after the snapshot: %+v", r)
	}
	if _, ok := h.Order(before[0]); ok {
		t.Fatal("a finished order before the snapshot was replayed")
	}
	if f := h.Floors(); f.Order == core.OrderID(gateway.NoFloor) || f.Order > after[0] || f.Order <= before[2] {
		t.Fatalf("order floor %d: want the first order placed after the snapshot (<= %d, > %d)", f.Order, after[0], before[2])
	}
	if f := h.Floors(); f.OrderSeq < mid || f.TradeSeq < mid {
		t.Fatalf("floors %+v: the archive must have persisted the snapshot's seq %d before it answers below them", f, mid)
	}

	// A WAL within the bound is replayed whole: every order is here.
	h, _ = warmupRestart(t, dir, rec.Seq)
	for _, id := range [...]core.OrderID{before[0], before[1], after[0], after[1]} {
		if !has(h, id, core.StatusFilled) {
			t.Fatalf("order %d not replayed from the whole WAL", id)
		}
	}
	if f := h.Floors(); f.Order > before[0] {
		t.Fatalf("order floor %d above the first order %d", f.Order, before[0])
	}
}
