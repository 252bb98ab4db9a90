package replication_test

import (
	"context"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/replication/natstest"
)

// startPrimary starts a pipeline as the log's writer (sync or async).
func startPrimary(t *testing.T, url string, sync bool) (*journal.Pipeline, *replication.Log) {
	t.Helper()
	pl := startPipeline(t, journal.Config{Standby: true})
	l := openLog(t, url, "primary")
	if _, err := replication.NewStandby(l, pl).Promote(context.Background(), sync); err != nil {
		t.Fatal(err)
	}
	return pl, l
}

// acked submits a tick and tells whether it is acknowledged within d.
func acked(t *testing.T, pl *journal.Pipeline, d time.Duration) (core.Seq, bool) {
	t.Helper()
	r := journal.NewReply()
	seq, err := pl.Submit(&core.Command{Kind: core.KindTick}, r)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return seq, pl.WaitContext(ctx, r) == nil
}

// TestSyncAcknowledgesOnlyWhatTheLogHolds is sync mode's bound: while the
// log cannot store (its NATS server is down) nothing is acknowledged, and
// what is acknowledged afterwards is in the log.
func TestSyncAcknowledgesOnlyWhatTheLogHolds(t *testing.T) {
	c := natstest.Start(t, 1)
	pl, l := startPrimary(t, c.URL(), true)
	w := workload(t, 5)
	last := submit(t, pl, w, 200)
	c.StopNode(0)
	seq, ok := acked(t, pl, 2*time.Second)
	if ok || pl.DurableSeq() != last {
		t.Fatalf("sync: command %d acknowledged (durable %d) while the log was down", seq, pl.DurableSeq())
	}
	if err := c.StartNode(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the command once the log is back", func() bool { return pl.DurableSeq() >= seq })
	if l.Appended() < seq {
		t.Fatalf("acknowledged %d, the log holds %d", seq, l.Appended())
	}
}

// TestAsyncAcknowledgesAheadOfTheLog is async mode's bound: commands are
// acknowledged after the local fsync while the log cannot store them — the
// window a standby taking over would lose — and the log catches up.
func TestAsyncAcknowledgesAheadOfTheLog(t *testing.T) {
	c := natstest.Start(t, 1)
	pl, l := startPrimary(t, c.URL(), false)
	a := replication.NewAsync(l, pl)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = a.Run(ctx) }()
	w := workload(t, 5)
	last := submit(t, pl, w, 200)
	waitFor(t, "the log", func() bool { return a.Appended() >= last })
	c.StopNode(0)
	seq, ok := acked(t, pl, 5*time.Second)
	if !ok {
		t.Fatal("async: a command was not acknowledged while the log was down")
	}
	if a.Appended() >= seq || a.Lag() == 0 {
		t.Fatalf("async: the log holds %d (lag %d) of acknowledged %d: the test did not open the window", a.Appended(), a.Lag(), seq)
	}
	if err := c.StartNode(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the log to catch up", func() bool { return a.Appended() >= seq && a.Lag() == 0 })
}
