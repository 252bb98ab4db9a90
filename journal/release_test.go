package journal

// These tests prove the release hand-over (release in stages.go): with no
// responder goroutine, every command is still released exactly once, in seq
// order, never concurrently, only once durable and applied (and in the read
// view), and nothing is left unreleased when the producers stop.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

func TestReleaseOrderedOnceAndComplete(t *testing.T) {
	for _, view := range []bool{false, true} {
		for _, noSync := range []bool{true, false} {
			name := map[bool]string{false: "processor", true: "view"}[view] + map[bool]string{false: "/fsync", true: "/nosync"}[noSync]
			t.Run(name, func(t *testing.T) { testRelease(t, view, noSync) })
		}
	}
}

func testRelease(t *testing.T, view, noSync bool) {
	var (
		pl      *Pipeline
		inAck   atomic.Int32
		last    atomic.Int64 // last core seq acked
		badNote atomic.Pointer[string]
	)
	bad := func(s string) { badNote.CompareAndSwap(nil, &s) }
	cfg := Config{Dir: t.TempDir(), Logger: quietLog(), NoSync: noSync, ReadView: view, RingSize: 256, MaxBatch: 64,
		TruncateLimit: keepAll}
	cfg.OnAck = func(s *Slot) {
		if inAck.Add(1) != 1 {
			bad("OnAck called concurrently")
		}
		seq := int64(s.Cmd.Seq)
		if prev := last.Swap(seq); prev != seq-1 {
			bad("OnAck out of order")
		}
		if pl.DurableSeq() < s.Cmd.Seq || pl.AppliedSeq() < s.Cmd.Seq {
			bad("OnAck before durable and applied")
		}
		if s.Result.Seq != s.Cmd.Seq {
			bad("OnAck before the result was set")
		}
		inAck.Add(-1)
	}
	var err error
	pl, err = Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runAll(t, pl, setupCmds()) // acked one by one, with replies
	const producers, perProducer = 4, 3000
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			r := NewReply()
			for i := 0; i < perProducer; {
				if i%97 == 0 { // now and then a waiting caller
					c := core.Command{Kind: core.KindTick}
					seq, err := pl.Submit(&c, r)
					if err != nil {
						bad(err.Error())
						return
					}
					if err := pl.Wait(r); err != nil || pl.DurableSeq() < seq || r.Result().Seq != seq {
						bad("reply released early or lost")
						return
					}
					i++
					continue
				}
				n := min(1+(i+p)%16, perProducer-i)
				if _, err := pl.SubmitFunc(n, func(_ core.Seq, c *core.Command) { c.Kind = core.KindTick }); err != nil {
					bad(err.Error())
					return
				}
				i += n
			}
		})
	}
	wg.Wait()
	want := pl.ring.Claimed() + int64(pl.base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for int64(pl.AckedSeq()) < want {
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d released: a release was lost", pl.AckedSeq(), want)
		}
		time.Sleep(time.Millisecond)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if s := badNote.Load(); s != nil {
		t.Fatal(*s)
	}
	if last.Load() != want || int64(pl.AckedSeq()) != want {
		t.Fatalf("last OnAck %d, acked %d, want %d", last.Load(), pl.AckedSeq(), want)
	}
}
