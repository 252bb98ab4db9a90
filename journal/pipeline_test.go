package journal

// These tests prove the pipeline's contract end to end on a real WAL:
// replies come back only when durable, state survives Close + Start with the
// same hash, snapshots + WAL replay equal a replay from scratch, and a
// poison command is rejected whole and deterministically on replay.

import (
	"bytes"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/ubscore/ubscore/core"
)

// keepAll forbids WAL front truncation, so a replay from scratch stays possible.
func keepAll() core.Seq { return 0 }

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func setupCmds() []core.Command {
	k := func(s string) core.Key { key, _ := core.KeyFrom(s); return key }
	cmds := []core.Command{
		{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 8},
		{Kind: core.KindConfigAsset, Asset: 2, BaseScale: 6},
		{Kind: core.KindConfigMarket, Market: 1, Cfg: core.MarketCfg{Base: 1, Quote: 2, BaseScale: 8,
			Tick: 10_000, Lot: 10_000, MinQty: 10_000, MaxQty: 100_000_000_000, MakerFee: 1000, TakerFee: 2000}},
		{Kind: core.KindSpotDeposit, User: 1, Asset: 1, Amount: 10_000_000_000, Key: k("d1")},
		{Kind: core.KindSpotDeposit, User: 2, Asset: 2, Amount: 10_000_000_000_000, Key: k("d2")},
	}
	for i := 0; i < 50; i++ {
		cmds = append(cmds,
			core.Command{Kind: core.KindPlaceOrder, User: 1, Market: 1, Side: core.Sell, Type: core.Limit, TIF: core.GTC,
				Price: core.Price(50_000_000_000 + int64(i%5)*10_000), Qty: 1_000_000},
			core.Command{Kind: core.KindPlaceOrder, User: 2, Market: 1, Side: core.Buy, Type: core.Limit, TIF: core.GTC,
				Price: core.Price(50_000_000_000 + int64(i%7)*10_000), Qty: 500_000})
	}
	return cmds
}

func runAll(t *testing.T, pl *Pipeline, cmds []core.Command) {
	t.Helper()
	r := NewReply()
	for i := range cmds {
		seq, err := pl.Submit(&cmds[i], r)
		if err != nil {
			t.Fatal(err)
		}
		if err := pl.Wait(r); err != nil {
			t.Fatal(err)
		}
		if pl.DurableSeq() < seq {
			t.Fatalf("reply for seq %d released before durable (%d)", seq, pl.DurableSeq())
		}
		if res := r.Result(); res.Seq != seq || res.Code != core.OK {
			t.Fatalf("cmd %d (%v): result %+v", i, cmds[i].Kind, res)
		}
	}
}

// setupDir runs setupCmds through a pipeline (a snapshot every 40
// commands, the whole WAL kept) and closes it: a data dir and the
// pipeline, whose processor holds the final state.
func setupDir(t *testing.T) (string, *Pipeline) {
	t.Helper()
	dir := t.TempDir()
	pl, err := Start(Config{Dir: dir, Logger: quietLog(), SnapshotEvery: 40, TruncateLimit: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	runAll(t, pl, setupCmds())
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, pl
}

func TestPipelineRestartSameHash(t *testing.T) {
	dir, pl := setupDir(t)
	hash, last := pl.Processor().StateHash(), pl.Processor().LastSeq()

	rec, err := Recover(RecoverConfig{Dir: dir, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	rec.WAL.Close()
	if rec.StateHash != hash || rec.Proc.LastSeq() != last {
		t.Fatalf("recovered %s@%d, want %s@%d", rec.StateHash, rec.Proc.LastSeq(), hash, last)
	}
	if rec.SnapshotSeq == 0 {
		t.Fatal("expected a snapshot to be used")
	}
	full, err := Recover(RecoverConfig{Dir: dir, Logger: quietLog(), IgnoreSnapshots: true, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	full.WAL.Close()
	if full.StateHash != hash {
		t.Fatal("replay from scratch differs from snapshot + replay")
	}
}

func TestPipelinePoisonCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Logger: quietLog(), Core: core.Config{AllowDebugPanic: true}, SnapshotEvery: 30,
		TruncateLimit: keepAll}
	pl, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmds := setupCmds()
	runAll(t, pl, cmds[:40])
	r := NewReply()
	seq, err := pl.Submit(&core.Command{Kind: core.KindDebugPanic, User: 1}, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Wait(r); err != nil {
		t.Fatal(err)
	}
	if res := r.Result(); res.Seq != seq || res.Code != core.CodePoisonCommand {
		t.Fatalf("poison result %+v", res)
	}
	runAll(t, pl, cmds[40:])
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	hash := pl.Processor().StateHash()
	// The debug panic disables user 1 before panicking; if the half-applied
	// state had survived, user 1's later orders would have been rejected.
	full, err := Recover(RecoverConfig{Dir: dir, Logger: quietLog(), IgnoreSnapshots: true, ReadOnly: true,
		Core: core.Config{AllowDebugPanic: true}})
	if err != nil {
		t.Fatal(err)
	}
	full.WAL.Close()
	if _, ok := full.Poisoned[seq]; full.StateHash != hash || !ok {
		t.Fatalf("replay: hash equal=%v poisoned=%v", full.StateHash == hash, full.Poisoned)
	}
}

// TestRecoverKeepsTheBaseBytes: a recovery that replays nothing (a
// graceful stop snapshots at its last seq) hands the replicas the base
// snapshot's own bytes, which are exactly the recovered state's
// serialization (so its state hash is the one every node computes); one
// that replays commands serializes the state it reached.
func TestRecoverKeepsTheBaseBytes(t *testing.T) {
	dir, _ := setupDir(t)
	snaps, err := OpenSnapshotStore(filepath.Join(dir, SnapshotDir), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	last, file, err := snaps.Latest()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Recover(RecoverConfig{Dir: dir, Logger: quietLog(), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rec.WAL.Close()
	if rec.Replayed != 0 || uint64(rec.SnapshotSeq) != last {
		t.Fatalf("recovered from %d replaying %d: want the final snapshot %d, nothing replayed", rec.SnapshotSeq, rec.Replayed, last)
	}
	if !bytes.Equal(rec.State, file) {
		t.Fatal("the state handed on is not the base's bytes")
	}
	if !bytes.Equal(rec.State, rec.Proc.AppendSnapshot(nil)) || rec.StateHash != rec.Proc.StateHash() {
		t.Fatal("the base's bytes are not the recovered state's serialization")
	}
	// From an older snapshot: the commands after it are replayed, and the
	// state handed on is the serialization of where they led.
	rec, err = Recover(RecoverConfig{Dir: dir, Logger: quietLog(), ReadOnly: true, UpTo: core.Seq(last) - 1})
	if err != nil {
		t.Fatal(err)
	}
	rec.WAL.Close()
	if rec.Replayed == 0 || !bytes.Equal(rec.State, rec.Proc.AppendSnapshot(nil)) {
		t.Fatalf("replayed %d: the state handed on is not the replayed state's serialization", rec.Replayed)
	}
}
