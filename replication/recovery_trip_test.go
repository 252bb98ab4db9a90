package replication_test

import (
	"context"
	"testing"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/replication/natstest"
)

// brokenMarket submits a small venue (two markets, two funded users,
// resting orders) and a fault that breaks market 1's level totals, found
// by no check before the stop.
func brokenMarket(t *testing.T, pl *journal.Pipeline) {
	t.Helper()
	cmds := []core.Command{{Kind: core.KindConfigAsset, Asset: 1}, {Kind: core.KindConfigAsset, Asset: 2}}
	for _, m := range []core.MarketID{1, 2} {
		cmds = append(cmds, core.Command{Kind: core.KindConfigMarket, Market: m, Cfg: core.MarketCfg{Base: 1, Quote: 2,
			Tick: 1, Lot: 1, MinQty: 1, MaxQty: 1000, MakerFee: 1000, TakerFee: 2000}})
	}
	for _, u := range []core.UserID{1, 2} {
		b, _ := core.KeyFrom("b" + string(rune('0'+u)))
		q, _ := core.KeyFrom("q" + string(rune('0'+u)))
		cmds = append(cmds, core.Command{Kind: core.KindSpotDeposit, User: u, Asset: 1, Amount: 10_000, Key: b},
			core.Command{Kind: core.KindSpotDeposit, User: u, Asset: 2, Amount: 1_000_000, Key: q})
	}
	for i := 0; i < 6; i++ {
		m := core.MarketID(1 + i%2)
		cmds = append(cmds, core.Command{Kind: core.KindPlaceOrder, User: 1, Market: m, Side: core.Sell, Type: core.Limit,
			TIF: core.GTC, Price: core.Price(100 + i), Qty: 3})
	}
	cmds = append(cmds, core.Command{Kind: core.KindFault, Flags: uint8(core.FaultLevelDrift), Market: 1, Side: core.Sell, Amount: 4})
	r := journal.NewReply()
	for i := range cmds {
		if _, err := pl.Submit(&cmds[i], r); err != nil {
			t.Fatal(err)
		}
		if err := pl.Wait(r); err != nil {
			t.Fatal(err)
		}
		if res := r.Result(); res.Code != core.OK {
			t.Fatalf("command %d (%v): %v", i, cmds[i].Kind, res.Code)
		}
	}
}

// TestReplicatedPrimaryRestartTripsThroughTheLog: a replicated primary
// (started, as every replicated node, as a standby) whose recovery finds a
// market broken starts — before, its recovery's trip was refused on the
// standby pipeline and the start failed — and, once it has claimed the
// log, halts the market with RECOVERY_FAILED through the log: a standby
// following it applies the same halt.
func TestReplicatedPrimaryRestartTripsThroughTheLog(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx := context.Background()
	dir := t.TempDir()
	cfg := journal.Config{Dir: dir, Logger: quiet(), ReadView: true, Core: core.Config{AllowFaults: true}}
	pl, err := journal.Start(cfg) // the venue before replication: its WAL holds the damage
	if err != nil {
		t.Fatal(err)
	}
	brokenMarket(t, pl)
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}

	cfg.Standby = true
	pa, err := journal.Start(cfg)
	if err != nil {
		t.Fatalf("a replicated primary whose recovery found damage does not start: %v", err)
	}
	t.Cleanup(func() { _ = pa.Close() })
	if n := len(pa.Recovery().Open); n != 1 {
		t.Fatalf("recovery found %d open violations, want 1", n)
	}
	la := openLog(t, c.URL(), "a")
	if _, err := replication.NewStandby(la, pa).Promote(ctx, true); err != nil {
		t.Fatal(err)
	}
	halted := func(pl *journal.Pipeline) bool {
		var v core.MarketView
		if err := pl.Read(func(p *core.Processor) error { v, _ = p.Market(1); return nil }); err != nil {
			t.Fatal(err)
		}
		return v.Status == core.MarketHalted && v.HaltReason == core.ReasonRecoveryFailed
	}
	if !halted(pa) {
		t.Fatal("market 1 not halted RECOVERY_FAILED after the claim")
	}
	trip := pa.DurableSeq()
	if la.Appended() != trip {
		t.Fatalf("the log holds commands up to %d, the primary's trip is %d", la.Appended(), trip)
	}

	pb := startPipeline(t, journal.Config{Standby: true, Core: core.Config{AllowFaults: true}})
	sb := replication.NewStandby(openLog(t, c.URL(), "b"), pb)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = sb.Run(sctx) }()
	waitFor(t, "the standby at the trip", func() bool { return pb.DurableSeq() >= trip && pb.ViewSeq() >= trip })
	if !halted(pb) {
		t.Fatal("the standby did not apply the primary's trip")
	}
	if _, ha := viewHash(t, pa); func() string { _, h := viewHash(t, pb); return h }() != ha {
		t.Fatal("the standby's state differs from the primary's at the same seq")
	}
}
