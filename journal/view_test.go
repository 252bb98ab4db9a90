package journal

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

// TestReadViewReadYourWrites: once Wait returns for a command, Read shows
// its effect, the view's seq is durable, and OnView saw the command's events.
func TestReadViewReadYourWrites(t *testing.T) {
	var seen atomic.Int64
	pl, err := Start(Config{Dir: t.TempDir(), Logger: quietLog(), ReadView: true,
		OnView: func(c *core.Command, evs []core.Event) {
			if len(evs) == 0 || evs[len(evs)-1].Kind != core.EvResult || evs[len(evs)-1].Seq != c.Seq {
				panic("OnView without the command's result")
			}
			seen.Add(1)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	cmds := setupCmds()
	r := NewReply()
	for i := range cmds {
		seq, err := pl.Submit(&cmds[i], r)
		if err != nil {
			t.Fatal(err)
		}
		if err := pl.Wait(r); err != nil {
			t.Fatal(err)
		}
		var viewSeq core.Seq
		var bal core.Balance
		if err := pl.Read(func(p *core.Processor) error {
			viewSeq = p.LastSeq()
			bal = p.BalanceOf(cmds[i].User, 1)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if viewSeq < seq {
			t.Fatalf("after the reply for seq %d the view reflects only seq %d", seq, viewSeq)
		}
		if pl.DurableSeq() < viewSeq {
			t.Fatalf("Read returned a view at seq %d before it was durable (%d)", viewSeq, pl.DurableSeq())
		}
		if i == 3 && bal.Avail != cmds[3].Amount { // the first deposit
			t.Fatalf("deposit not visible: %+v", bal)
		}
	}
	if got := seen.Load(); got < int64(len(cmds)) {
		t.Fatalf("OnView saw %d commands, want >= %d", got, len(cmds))
	}
	if err := pl.Read(func(*core.Processor) error { return errors.New("boom") }); err == nil || err.Error() != "boom" {
		t.Fatalf("Read did not return fn's error: %v", err)
	}
}

// TestReadViewMatchesProcessor: after a stream with trades and a poison
// command, the replica's state hash equals the processor's.
func TestReadViewMatchesProcessor(t *testing.T) {
	pl, err := Start(Config{Dir: t.TempDir(), Logger: quietLog(), ReadView: true, SnapshotEvery: 40,
		Core: core.Config{AllowDebugPanic: true}})
	if err != nil {
		t.Fatal(err)
	}
	cmds := setupCmds()
	runAll(t, pl, cmds[:60])
	r := NewReply()
	if _, err := pl.Submit(&core.Command{Kind: core.KindDebugPanic, User: 1}, r); err != nil {
		t.Fatal(err)
	}
	if err := pl.Wait(r); err != nil {
		t.Fatal(err)
	}
	if r.Result().Code != core.CodePoisonCommand {
		t.Fatalf("poison result %v", r.Result().Code)
	}
	runAll(t, pl, cmds[60:])
	var viewHash string
	if err := pl.Read(func(p *core.Processor) error { viewHash = p.StateHash(); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if h := pl.Processor().StateHash(); h != viewHash {
		t.Fatalf("view hash %s != processor hash %s", viewHash, h)
	}
	if err := pl.Read(func(*core.Processor) error { return nil }); err != nil {
		t.Fatalf("Read after Close of a durable view: %v", err)
	}
}

// TestCloseUnderConcurrentSubmit: Close while producers keep submitting
// never hangs (a producer that claimed before the ring closed may publish
// after the journaler drained: the processor may apply it, but no wait on
// its durability may block forever) and every acknowledged command
// survives a restart.
func TestCloseUnderConcurrentSubmit(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 8
	}
	for round := 0; round < rounds; round++ {
		dir := t.TempDir()
		pl, err := Start(Config{Dir: dir, Logger: quietLog(), ReadView: true, SnapshotEvery: 50, RingSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		var acked atomic.Uint64
		var wg sync.WaitGroup
		for p := 0; p < 4; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := NewReply()
				for {
					seq, err := pl.Submit(&core.Command{Kind: core.KindTick}, r)
					if err != nil {
						return
					}
					if pl.Wait(r) != nil {
						return
					}
					for {
						a := acked.Load()
						if uint64(seq) <= a || acked.CompareAndSwap(a, uint64(seq)) {
							break
						}
					}
					_ = pl.Read(func(*core.Processor) error { return nil })
				}
			}()
		}
		time.Sleep(time.Duration(1+round%5) * time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- pl.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: Close: %v", round, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Close hung", round)
		}
		wg.Wait()
		rec, err := Recover(RecoverConfig{Dir: dir, Logger: quietLog()})
		if err != nil {
			t.Fatalf("round %d: recover: %v", round, err)
		}
		if rec.Proc.LastSeq() < core.Seq(acked.Load()) {
			t.Fatalf("round %d: acknowledged seq %d lost (recovered to %d)", round, acked.Load(), rec.Proc.LastSeq())
		}
		rec.WAL.Close()
	}
}

// TestSubmitBatchAndFuncValidate: empty, oversized and invalid-kind
// batches are refused with errors, never a panic; an invalid kind from a
// SubmitFunc fill is journaled as a no-op tick.
func TestSubmitBatchAndFuncValidate(t *testing.T) {
	pl, err := Start(Config{Dir: t.TempDir(), Logger: quietLog(), RingSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if _, err := pl.SubmitBatch(nil); !errors.Is(err, ErrBatchSize) {
		t.Fatalf("empty batch: %v", err)
	}
	if _, err := pl.SubmitBatch(make([]core.Command, 17)); !errors.Is(err, ErrBatchSize) {
		t.Fatalf("oversized batch: %v", err)
	}
	if _, err := pl.SubmitBatch([]core.Command{{Kind: core.KindTick}, {Kind: 200}}); !errors.Is(err, ErrInvalidKind) {
		t.Fatalf("invalid kind in batch: %v", err)
	}
	if _, err := pl.SubmitFunc(0, func(core.Seq, *core.Command) {}); !errors.Is(err, ErrBatchSize) {
		t.Fatalf("SubmitFunc(0): %v", err)
	}
	first, err := pl.SubmitFunc(2, func(_ core.Seq, c *core.Command) { c.Kind = 99 })
	if !errors.Is(err, ErrInvalidKind) {
		t.Fatalf("SubmitFunc invalid kind: %v", err)
	}
	r := NewReply()
	seq, err := pl.Submit(&core.Command{Kind: core.KindTick}, r)
	if err != nil || pl.Wait(r) != nil {
		t.Fatal(err)
	}
	if seq != first+2 {
		t.Fatalf("seqs not consumed: first %d, next %d", first, seq)
	}
	if (&Reply{}).Result() != (core.Event{}) {
		t.Fatal("Result of an empty reply is not the zero event")
	}
}
