package replication_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/replication/natstest"
)

// TestPromotionWhileGroupCommitsLag: a standby promoted while its journaler
// has not yet written commands it applied from the log (SubmitSequenced
// does not wait for them; here a group commit is held) writes them after
// the promotion, with the log as its Replicator: they must not go to the
// log a second time after the epoch marker. The log stays one run of
// commands in order, the new primary's own commands after it.
func TestPromotionWhileGroupCommitsLag(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx := context.Background()
	la, lb := openLog(t, c.URL(), "a"), openLog(t, c.URL(), "b")
	if err := la.Claim(ctx, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	pa := startPipeline(t, journal.Config{Replicator: la})
	var hold atomic.Bool
	blocked, release := make(chan struct{}, 1), make(chan struct{})
	pb := startPipeline(t, journal.Config{Standby: true, OnJournalBatch: func(int, time.Duration) {
		if hold.CompareAndSwap(true, false) {
			blocked <- struct{}{}
			<-release
		}
	}})
	sb := replication.NewStandby(lb, pb)
	runErr := make(chan error, 1)
	go func() { runErr <- sb.Run(ctx) }()
	w, err := bench.NewWorkload(11, bench.Options{Users: 50, Markets: 2, SeedPerBook: 20})
	if err != nil {
		t.Fatal(err)
	}
	last := submit(t, pa, w, 500)
	waitFor(t, "the standby to catch up", func() bool { return pb.DurableSeq() >= last })

	hold.Store(true) // the standby's next group commit is held once written
	last = submit(t, pa, w, 100)
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the standby's journaler never wrote the next group commit")
	}
	last = submit(t, pa, w, 100) // applied by the standby, not yet journaled: the journaler is held
	waitFor(t, "the standby to apply them", func() bool { return pb.AppliedSeq() >= last })
	if pb.DurableSeq() >= last {
		t.Fatal("the standby journaled everything: no window")
	}
	promoted := make(chan error, 1)
	go func() { _, err := sb.Promote(ctx, true); promoted <- err }()
	select {
	case err := <-promoted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("the promotion waits for the held group commit")
	}
	close(release) // the rest is journaled now, with the log as the Replicator
	if err := <-runErr; err != nil {
		t.Fatalf("standby run: %v", err)
	}
	more := submit(t, pb, w, 50)
	if more != last+50 || lb.Appended() != more {
		t.Fatalf("new primary: last %d (want %d), the log holds up to %d", more, last+50, lb.Appended())
	}
	// The log: one run of commands, 1..more, in order, across both epochs.
	tail, _, err := lb.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var prev uint64
	done := errors.New("done")
	err = lb.Follow(fctx, 1, func(sq uint64, r replication.Record) error {
		if r.Kind == replication.KindCommands && uint64(r.Seq) != prev+1 {
			t.Errorf("stream sequence %d: commands from %d after command %d (epoch %d)", sq, r.Seq, prev, r.Epoch)
		}
		if r.Kind == replication.KindCommands {
			prev = uint64(r.Last())
		}
		if sq == tail {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		t.Fatal(err)
	}
	if prev != uint64(more) {
		t.Fatalf("the log's commands end at %d, want %d", prev, more)
	}
}
