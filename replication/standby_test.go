package replication_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/replication/natstest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openLog(t *testing.T, url, node string) *replication.Log {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := replication.Open(ctx, replication.Config{URL: url, Node: node, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func startPipeline(t *testing.T, cfg journal.Config) *journal.Pipeline {
	t.Helper()
	cfg.Dir, cfg.Logger, cfg.ReadView, cfg.SnapshotEvery = t.TempDir(), quiet(), true, 700
	pl, err := journal.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pl.Close() })
	return pl
}

// submit sequences n workload commands on pl and waits until they are
// durable; it returns the last seq.
func submit(t *testing.T, pl *journal.Pipeline, w *bench.Workload, n int) core.Seq {
	t.Helper()
	var last core.Seq
	for n > 0 {
		k := min(n, 100)
		first, err := pl.SubmitFunc(k, w.Fill)
		if err != nil {
			t.Fatal(err)
		}
		last, n = first+core.Seq(k)-1, n-k
	}
	waitFor(t, "durable", func() bool { return pl.DurableSeq() >= last })
	return last
}

// workload is a small deterministic order flow (bench.Workload).
func workload(t *testing.T, seed uint64) *bench.Workload {
	t.Helper()
	w, err := bench.NewWorkload(seed, bench.Options{Users: 20, Markets: 1, SeedPerBook: 10})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// viewHash is the read view's seq and state hash.
func viewHash(t *testing.T, pl *journal.Pipeline) (seq core.Seq, hash string) {
	t.Helper()
	if err := pl.Read(func(p *core.Processor) error {
		seq, hash = p.LastSeq(), p.StateHash()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return seq, hash
}

// TestStandbyFollowsAndPromotes: a primary whose group commits are durable
// only once the log holds them, and a standby applying the log to its own
// pipeline: the standby reaches the primary's state (same hash at the same
// seq) and refuses commands of its own; promoted, it claims the log and
// serves writes, and the old primary's next command is refused by the
// fence and never acknowledged.
func TestStandbyFollowsAndPromotes(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx := context.Background()
	la, lb := openLog(t, c.URL(), "a"), openLog(t, c.URL(), "b")
	if err := la.Claim(ctx, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	pa := startPipeline(t, journal.Config{Replicator: la})
	pb := startPipeline(t, journal.Config{Standby: true})
	sb := replication.NewStandby(lb, pb)
	runErr := make(chan error, 1)
	go func() { runErr <- sb.Run(ctx) }()

	w, err := bench.NewWorkload(7, bench.Options{Users: 50, Markets: 2, SeedPerBook: 20})
	if err != nil {
		t.Fatal(err)
	}
	last := submit(t, pa, w, 3000)
	if la.Appended() < last {
		t.Fatalf("primary acknowledged up to %d, the log holds up to %d", last, la.Appended())
	}
	waitFor(t, "the standby to catch up", func() bool { return pb.DurableSeq() >= last })
	waitFor(t, "the standby's view", func() bool { s, _ := viewHash(t, pb); return s >= last })
	sa, ha := viewHash(t, pa)
	sbSeq, hb := viewHash(t, pb)
	if sa != last || sbSeq != last || ha != hb {
		t.Fatalf("primary at %d hash %s, standby at %d hash %s", sa, ha, sbSeq, hb)
	}
	if _, err := pb.Submit(&core.Command{Kind: core.KindTick}, nil); !errors.Is(err, journal.ErrStandby) {
		t.Fatalf("a standby sequenced a command of its own: %v", err)
	}

	epoch, err := sb.Promote(ctx, true)
	if err != nil || epoch != 2 {
		t.Fatalf("promote: epoch %d, %v", epoch, err)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("standby run: %v", err)
	}
	// The old primary: its next group commit is refused, nothing acknowledged.
	r := journal.NewReply()
	if _, err := pa.Submit(&core.Command{Kind: core.KindTick}, r); err != nil {
		t.Fatal(err)
	}
	if err := pa.Wait(r); !errors.Is(err, replication.ErrFenced) {
		t.Fatalf("old primary after the promotion: %v, want ErrFenced", err)
	}
	if pa.DurableSeq() != last || !la.Fenced() {
		t.Fatalf("old primary durable %d (want %d), fenced %v", pa.DurableSeq(), last, la.Fenced())
	}
	// The new primary serves writes, every one in the log first.
	more := submit(t, pb, w, 500)
	if more != last+500 || lb.Appended() != more || lb.Epoch() != 2 {
		t.Fatalf("new primary: last %d (want %d), log holds %d at epoch %d", more, last+500, lb.Appended(), lb.Epoch())
	}
}

// TestRestartedPrimaryAndDivergence: a node starting as the primary whose
// WAL ends past the log (commands written locally, never stored by the
// log) appends them to the log before it serves; a standby started on it
// reaches the same state; and a node whose WAL holds other commands at the
// same seqs refuses to apply the log (ErrDiverged) instead of forking.
func TestRestartedPrimaryAndDivergence(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx := context.Background()
	w := workload(t, 3)
	// A's WAL holds 400 commands the log has never seen.
	dirA := t.TempDir()
	pa, err := journal.Start(journal.Config{Dir: dirA, Logger: quiet(), SnapshotEvery: 150})
	if err != nil {
		t.Fatal(err)
	}
	last := submit(t, pa, w, 400)
	if err := pa.Close(); err != nil {
		t.Fatal(err)
	}
	pa, err = journal.Start(journal.Config{Dir: dirA, Logger: quiet(), Standby: true, ReadView: true, SnapshotEvery: 150})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pa.Close() })
	la := openLog(t, c.URL(), "a")
	if epoch, err := replication.NewStandby(la, pa).Promote(ctx, true); err != nil || epoch != 1 {
		t.Fatalf("start as primary: epoch %d, %v", epoch, err)
	}
	if la.Appended() != last {
		t.Fatalf("the log holds up to %d, A's WAL up to %d", la.Appended(), last)
	}
	last = submit(t, pa, w, 100)

	pb := startPipeline(t, journal.Config{Standby: true})
	go func() { _ = replication.NewStandby(openLog(t, c.URL(), "b"), pb).Run(ctx) }()
	waitFor(t, "the standby", func() bool { s, _ := viewHash(t, pb); return s >= last })
	sa, ha := viewHash(t, pa)
	sb, hb := viewHash(t, pb)
	if sa != sb || ha != hb {
		t.Fatalf("primary %d %s, standby %d %s", sa, ha, sb, hb)
	}

	// C wrote 50 commands of its own (another workload): not the log's.
	dirC := t.TempDir()
	pc, err := journal.Start(journal.Config{Dir: dirC, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	other := workload(t, 99)
	submit(t, pc, other, 50)
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	pc, err = journal.Start(journal.Config{Dir: dirC, Logger: quiet(), Standby: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	run, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := replication.NewStandby(openLog(t, c.URL(), "c"), pc).Run(run); !errors.Is(err, replication.ErrDiverged) {
		t.Fatalf("a diverged node followed the log: %v", err)
	}
	if pc.DurableSeq() != 50 {
		t.Fatalf("the diverged node applied the log: durable %d", pc.DurableSeq())
	}
}
