package journal

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

// TestFollowerDerivesTheSameEvents: a Follower started at any seq yields,
// for every durable command, exactly the events the processor produced, and
// its replica ends in the same state (including across a poison command and
// periodic snapshots).
func TestFollowerDerivesTheSameEvents(t *testing.T) {
	dir := t.TempDir()
	live := map[core.Seq][]core.Event{}
	pl, err := Start(Config{Dir: dir, Logger: quietLog(), SnapshotEvery: 25, TruncateLimit: keepAll,
		Core: core.Config{AllowDebugPanic: true},
		OnAck: func(s *Slot) {
			if s.Reply != nil {
				live[s.Cmd.Seq] = append([]core.Event(nil), s.Reply.Events...)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	cmds := setupCmds()
	cmds = append(cmds[:40:40], append([]core.Command{{Kind: core.KindDebugPanic, User: 1}}, cmds[40:]...)...)
	r := NewReply()
	for i := range cmds {
		if _, err := pl.Submit(&cmds[i], r); err != nil {
			t.Fatal(err)
		}
		if err := pl.Wait(r); err != nil {
			t.Fatal(err)
		}
	}
	last := pl.DurableSeq()
	for _, from := range []core.Seq{1, 2, 26, 41, 42, last} {
		f, err := pl.NewFollower(from)
		if err != nil {
			t.Fatalf("from %d: %v", from, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for f.NextSeq() <= last {
			recs, err := f.Next(ctx, 7)
			if err != nil {
				t.Fatalf("from %d: %v", from, err)
			}
			for _, rec := range recs {
				want, ok := live[rec.Cmd.Seq]
				if !ok {
					t.Fatalf("no live events for seq %d", rec.Cmd.Seq)
				}
				if !reflect.DeepEqual(rec.Events, want) {
					t.Fatalf("from %d: seq %d events differ:\n got %+v\nwant %+v", from, rec.Cmd.Seq, rec.Events, want)
				}
			}
		}
		// The state follower's kind (background): the same replica, no
		// events copied, across the poison command too.
		b, err := pl.NewFollower(from)
		if err != nil {
			t.Fatal(err)
		}
		b.background = true
		for b.NextSeq() <= last {
			recs, err := b.Next(ctx, 3*backgroundYield)
			if err != nil {
				t.Fatalf("background, from %d: %v", from, err)
			}
			for _, rec := range recs {
				if len(rec.Events) != 0 {
					t.Fatalf("background, from %d: seq %d came with %d events", from, rec.Cmd.Seq, len(rec.Events))
				}
			}
		}
		if b.StateHash() != f.StateHash() {
			t.Fatalf("from %d: the background follower's replica %s, the follower's %s", from, b.StateHash(), f.StateHash())
		}
		// Nothing more is durable: Next waits until ctx ends.
		short, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
		if _, err := f.Next(short, 10); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next past the durable seq: %v", err)
		}
		cancel2()
		cancel()
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	f2hash := pl.Processor().StateHash()
	pl2, err := Start(Config{Dir: dir, Logger: quietLog(), Core: core.Config{AllowDebugPanic: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer pl2.Close()
	f, err := pl2.NewFollower(1)
	if err != nil {
		t.Fatal(err)
	}
	for f.NextSeq() <= last {
		if _, err := f.Next(context.Background(), 1000); err != nil {
			t.Fatal(err)
		}
	}
	if f.StateHash() != f2hash {
		t.Fatalf("follower replica hash %s != core hash %s", f.StateHash(), f2hash)
	}
}

// TestFollowerHistoryGone: once the WAL before a seq is truncated and no
// snapshot at or below it is left, NewFollower says from where it can start.
func TestFollowerHistoryGone(t *testing.T) {
	dir := t.TempDir()
	pl, err := Start(Config{Dir: dir, Logger: quietLog(), SnapshotEvery: 20, KeepSnapshots: 1, SegmentSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	runAll(t, pl, setupCmds())
	deadline := time.Now().Add(10 * time.Second)
	for pl.wal.FirstSeq() <= 1 && time.Now().Before(deadline) {
		runAll(t, pl, []core.Command{{Kind: core.KindTick}})
	}
	if pl.wal.FirstSeq() <= 1 {
		t.Fatal("the WAL front was never truncated")
	}
	_, err = pl.NewFollower(1)
	var hg *HistoryGoneError
	if !errors.As(err, &hg) || !errors.Is(err, ErrHistoryGone) || hg.Earliest <= 1 {
		t.Fatalf("NewFollower(1) = %v, want a HistoryGoneError", err)
	}
	f, err := pl.NewFollower(hg.Earliest)
	if err != nil {
		t.Fatalf("NewFollower(earliest %d): %v", hg.Earliest, err)
	}
	if _, err := f.Next(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFollowerWakesOnCommitAndStop: a caught-up Next sleeps until the
// journaler publishes a commit (no polling) and must never miss one: a
// follower consuming while commands are submitted one by one gets every
// command, each Next woken by its commit, and a Next blocked when the
// pipeline closes returns ErrStopped.
func TestFollowerWakesOnCommitAndStop(t *testing.T) {
	pl, err := Start(Config{Dir: t.TempDir(), Logger: quietLog(), TruncateLimit: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	runAll(t, pl, setupCmds())
	f, err := pl.NewFollower(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for f.NextSeq() <= pl.DurableSeq() {
		if _, err := f.Next(ctx, 1000); err != nil {
			t.Fatal(err)
		}
	}
	const n = 500
	got := make(chan error, 1)
	go func() { // follows the commands below as they commit
		want := f.NextSeq() + n
		for f.NextSeq() < want {
			if _, err := f.Next(ctx, 1000); err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}()
	r := NewReply()
	for i := 0; i < n; i++ {
		if _, err := pl.Submit(&core.Command{Kind: core.KindTick}, r); err != nil {
			t.Fatal(err)
		}
		if err := pl.Wait(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatalf("following %d single commits: %v (a commit that did not wake Next?)", n, err)
	}
	// Caught up again: Close wakes the blocked Next with ErrStopped.
	stopped := make(chan error, 1)
	go func() {
		_, err := f.Next(ctx, 10)
		stopped <- err
	}()
	// Close only once Next sleeps on the journaler's wake-up channel, so
	// that it is the channel (not the stopped check before it) that ends it.
	registered := func() bool {
		pl.durWait.mu.Lock()
		defer pl.durWait.mu.Unlock()
		return pl.durWait.ch != nil
	}
	for deadline := time.Now().Add(10 * time.Second); !registered(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Next never waited for a commit")
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("Next across Close: %v, want ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next still blocked 10 s after Close")
	}
}

// TestWaiterChanged: the channel of changed is closed by the next notify
// (shared by everybody registered before it) and a new one is handed out
// after it.
func TestWaiterChanged(t *testing.T) {
	var w waiter
	w.init()
	a, b := w.changed(), w.changed()
	if a != b {
		t.Fatal("two registrations before a notify got different channels")
	}
	select {
	case <-a:
		t.Fatal("closed before any notify")
	default:
	}
	w.notify()
	select {
	case <-a:
	default:
		t.Fatal("notify did not close the channel")
	}
	if w.waiters.Load() != 0 {
		t.Fatalf("%d waiters left after notify", w.waiters.Load())
	}
	c := w.changed()
	select {
	case <-c:
		t.Fatal("the channel after a notify is already closed")
	default:
	}
	w.notify()
	<-c
}

// TestReplyResultOnly: a Reply with ResultOnly gets exactly the EvResult
// that a full Reply of the same command ends with, and nothing else.
func TestReplyResultOnly(t *testing.T) {
	run := func(resultOnly bool) [][]core.Event {
		pl, err := Start(Config{Dir: t.TempDir(), Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		defer pl.Close()
		var out [][]core.Event
		cmds := setupCmds()
		for i := range cmds {
			r := NewReply()
			r.ResultOnly = resultOnly
			if _, err := pl.Submit(&cmds[i], r); err != nil {
				t.Fatal(err)
			}
			if err := pl.Wait(r); err != nil {
				t.Fatal(err)
			}
			evs := append([]core.Event(nil), r.Events...)
			for j := range evs {
				evs[j].Time = 0 // the pipelines' clocks differ
			}
			out = append(out, evs)
		}
		return out
	}
	full, only := run(false), run(true)
	multi := 0
	for i := range full {
		if len(full[i]) > 1 {
			multi++
		}
		if want := full[i][len(full[i])-1:]; !reflect.DeepEqual(only[i], want) {
			t.Fatalf("command %d: ResultOnly events %+v, want %+v", i, only[i], want)
		}
	}
	if multi == 0 {
		t.Fatal("no command had more than one event: the test shows nothing")
	}
}
