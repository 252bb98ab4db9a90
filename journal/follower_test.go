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
