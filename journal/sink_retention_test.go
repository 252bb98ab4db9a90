package journal

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

func ticks(n int) []core.Command {
	out := make([]core.Command, n)
	for i := range out {
		out[i] = core.Command{Kind: core.KindTick}
	}
	return out
}

// While TruncateLimit answers 0 (the sink has not read its checkpoint yet,
// e.g. Postgres is down at start), nothing is pruned: the snapshot the sink
// needs survives. (Found in review: it used to be deleted.)
func TestSinkPinUnknownPrunesNothing(t *testing.T) {
	dir := t.TempDir()
	var pin atomic.Uint64
	pin.Store(30)
	lim := func() core.Seq { return core.Seq(pin.Load()) }
	pl, err := Start(Config{Dir: dir, Logger: quietLog(), SnapshotEvery: 20, KeepSnapshots: 2, SegmentSize: 256, TruncateLimit: lim})
	if err != nil {
		t.Fatal(err)
	}
	runAll(t, pl, setupCmds())
	runAll(t, pl, ticks(40))
	time.Sleep(100 * time.Millisecond)
	runAll(t, pl, ticks(2))
	t.Logf("run1: wal first=%d last=%d", pl.wal.FirstSeq(), pl.wal.LastSeq())
	if _, err := pl.NewFollower(31); err != nil {
		t.Fatalf("run1 follower from 31: %v", err)
	}
	pl.Close()
	infos, _ := pl.snaps.List()
	t.Logf("run1 snapshots: %v", infos)

	// restart: the sink does not know its seq yet
	pin.Store(0)
	pl2, err := Start(Config{Dir: dir, Logger: quietLog(), SnapshotEvery: 20, KeepSnapshots: 2, SegmentSize: 256, TruncateLimit: lim})
	if err != nil {
		t.Fatal(err)
	}
	defer pl2.Close()
	runAll(t, pl2, ticks(70))
	time.Sleep(100 * time.Millisecond)
	infos, _ = pl2.snaps.List()
	t.Logf("run2 snapshots: %v; wal first=%d", infos, pl2.wal.FirstSeq())
	pin.Store(30) // the sink reads persisted_seq = 30
	_, err = pl2.NewFollower(31)
	var hg *HistoryGoneError
	if errors.As(err, &hg) {
		t.Errorf("NewFollower(31) = %v although the WAL still starts at %d", err, pl2.wal.FirstSeq())
	} else if err != nil {
		t.Fatal(err)
	}
}

// With no snapshot at or below the pin, the consumer needs the WAL from its
// start: it is not truncated. (Found in review: it used to be cut at pin+1.)
func TestSinkPinWithoutSnapshotKeepsWAL(t *testing.T) {
	dir := t.TempDir()
	lim := func() core.Seq { return 10 } // sink persisted 10, lagging
	pl, err := Start(Config{Dir: dir, Logger: quietLog(), SnapshotEvery: 60, KeepSnapshots: 2, SegmentSize: 256, TruncateLimit: lim})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	runAll(t, pl, setupCmds())
	time.Sleep(100 * time.Millisecond)
	runAll(t, pl, ticks(3))
	infos, _ := pl.snaps.List()
	t.Logf("snapshots %v wal first=%d", infos, pl.wal.FirstSeq())
	_, err = pl.NewFollower(11)
	var hg *HistoryGoneError
	if errors.As(err, &hg) {
		t.Errorf("sink restarting at persisted+1=11 gets %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
}

// A long WAL iteration (a follower's rebuild replay) must not stall the
// group commit: front truncation waits for it on the snapshotter, not on
// the journaler. (Found in review: acks stalled for the whole replay.)
func TestWALReaderDoesNotStallJournaler(t *testing.T) {
	dir := t.TempDir()
	pl, err := Start(Config{Dir: dir, Logger: quietLog(), SnapshotEvery: 20, KeepSnapshots: 1, SegmentSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	runAll(t, pl, setupCmds())
	started := make(chan struct{})
	go func() {
		first := true
		for first {
			// The snapshotter may truncate between FirstSeq and Iterate
			// (ErrOutOfRange): start again from the new first seq.
			err := pl.wal.Iterate(pl.wal.FirstSeq(), func(uint64, []byte) error {
				if first {
					first = false
					close(started)
					time.Sleep(3 * time.Second) // stands for a long rebuild replay
				}
				return nil
			})
			if err != nil && !errors.Is(err, ErrOutOfRange) {
				t.Errorf("Iterate: %v", err)
				close(started)
				return
			}
		}
	}()
	<-started
	var worst time.Duration
	for i := 0; i < 60; i++ {
		t0 := time.Now()
		runAll(t, pl, ticks(1))
		worst = max(worst, time.Since(t0))
	}
	t.Logf("worst ack latency while a follower iterates: %v", worst)
	if worst > time.Second {
		t.Errorf("journaler stalled %v behind a WAL reader", worst)
	}
}
