package replication_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/replication/natstest"
)

const testVenue = "0123456789abcdef0123456789abcdef"

// autoNode is one process of a venue under automatic failover, in
// process: its Failover (which outlives the node, as it outlives the
// exchange's serve loop), its pipeline on dir and its Node.
type autoNode struct {
	t    *testing.T
	id   string
	dir  string
	url  string
	fo   *replication.Failover
	pl   *journal.Pipeline
	node *replication.Node
}

func autoConfig(url, id string) replication.NodeConfig {
	return replication.NodeConfig{Log: replication.Config{URL: url, Node: id, Stream: "FO", Subject: "fo"},
		Mode: replication.ModeSync, Role: replication.RoleStandby, Failover: replication.FailoverAuto,
		LeaseTTL: 800 * time.Millisecond, HashEvery: 100, Logger: quiet()}
}

func openAuto(t *testing.T, url, id, dir string) *autoNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fo, err := replication.OpenFailover(ctx, autoConfig(url, id))
	if err != nil {
		t.Fatal(err)
	}
	return &autoNode{t: t, id: id, dir: dir, url: url, fo: fo}
}

// start prepares the data dir (rejoin or bootstrap) and starts the node
// as a standby, as serve does.
func (a *autoNode) start(venue string) {
	a.t.Helper()
	if err := a.startAs(replication.RoleStandby, venue); err != nil {
		a.t.Fatalf("%s: %v", a.id, err)
	}
}

// startAs starts the node in role as serve does (Prepare only for a
// standby).
func (a *autoNode) startAs(role replication.Role, venue string) error {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if role == replication.RoleStandby {
		if err := a.fo.Prepare(ctx, a.dir, venue); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	pl, err := journal.Start(journal.Config{Dir: a.dir, Logger: quiet(), ReadView: true, SnapshotEvery: 300, Standby: true})
	if err != nil {
		a.t.Fatal(err)
	}
	cfg := autoConfig(a.url, a.id)
	cfg.Role, cfg.Auto, cfg.Log.Venue = role, a.fo, venue
	cfg.CreateVenue = func() (string, error) { return testVenue, nil }
	cfg.AdoptVenue = func(v string) error {
		if v != testVenue {
			return errors.New("another venue: " + v)
		}
		return nil
	}
	n, err := replication.StartNode(ctx, cfg, pl)
	if err != nil {
		_ = pl.Close()
		return err
	}
	a.pl, a.node = pl, n
	return nil
}

// stop closes the node and its pipeline (a process's serve ending).
func (a *autoNode) stop() {
	a.node.Close()
	_ = a.pl.Close()
}

func waitClosed(t *testing.T, what string, ch <-chan struct{}, d time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	select {
	case <-ch:
		return time.Since(t0)
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
	return 0
}

// TestAutoFailover: two nodes that both start as standbys; the one that
// wins the lease claims the log (venue created then) and serves. When its
// lease lapses (its process stops renewing), the other takes over with
// every acknowledged command; the old primary acknowledges nothing more
// and its Lost fires. It journals a few commands the log never gets (its
// appends refused); restarted, Prepare discards that tail, and it follows
// the new primary to the same state hash. A wiped third node bootstraps
// from the bucket's snapshot and catches up too.
func TestAutoFailover(t *testing.T) {
	c := natstest.Start(t, 1)
	a := openAuto(t, c.URL(), "a", t.TempDir())
	a.start("")
	waitClosed(t, "a takes the lease and promotes", a.node.Promoted(), 10*time.Second)
	if !a.node.Primary() || a.node.Status().Failover != replication.FailoverAuto || !a.node.Status().LeaseHeld {
		t.Fatalf("a after the take-over: %+v", a.node.Status())
	}
	b := openAuto(t, c.URL(), "b", t.TempDir())
	defer b.fo.Close()
	b.start("")
	w := workload(t, 1)
	acked := submit(t, a.pl, w, 700) // durable on a primary in sync mode: the log holds it
	waitFor(t, "b follows", func() bool { return b.pl.ViewSeq() >= acked })
	if b.node.Primary() {
		t.Fatal("b is primary while a holds the lease")
	}

	// a's process stops renewing (as if dead to the cluster, alive here).
	a.fo.Lease().Close()
	lost := waitClosed(t, "a's lease ends", a.node.Lost(), 5*time.Second)
	took := waitClosed(t, "b takes over", b.node.Promoted(), 10*time.Second)
	t.Logf("a lost its lease after %v; b promoted %v after that", lost, took)
	if ackedAfter(a.pl, 3*time.Second) {
		t.Fatal("a acknowledged a command after losing its lease")
	}
	if !b.node.Primary() || b.node.Status().Epoch != 2 {
		t.Fatalf("b after the take-over: %+v", b.node.Status())
	}
	seqB, hashB := viewHash(t, b.pl)
	if seqB < acked {
		t.Fatalf("b holds up to %d, a acknowledged up to %d", seqB, acked)
	}
	more := submit(t, b.pl, workload(t, 2), 400)
	aLast := a.pl.AppliedSeq()
	a.stop()
	a.fo.Close()
	// What a journaled and the log never stored (an append lost with its
	// process): bytes no other node has, which would not even replay.
	walDir := filepath.Join(a.dir, journal.WALDir)
	w2, err := journal.Open(walDir, journal.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	tail := w2.LastSeq()
	for s := tail + 1; s <= tail+10; s++ {
		if err := w2.AppendBatch([]journal.Entry{{Seq: s, Payload: []byte("never in the log")}}); err != nil {
			t.Fatal(err)
		}
	}
	w2.Close()
	t.Logf("a applied up to %d, its WAL ends at %d (+10 unreplicated); the log's last command is %d (b's)", aLast, tail, more)

	// a's process restarts: Prepare discards what the log does not hold,
	// and a follows b.
	a = openAuto(t, c.URL(), "a", a.dir)
	defer a.fo.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.fo.Prepare(ctx, a.dir, testVenue); err != nil {
		t.Fatal(err)
	}
	if w2, err = journal.OpenReadOnly(walDir); err != nil {
		t.Fatal(err)
	}
	if w2.LastSeq() != tail {
		t.Fatalf("after Prepare a's WAL ends at %d, want %d (its unreplicated tail discarded)", w2.LastSeq(), tail)
	}
	w2.Close()
	a.start(testVenue)
	defer a.stop()
	waitFor(t, "a follows b", func() bool { return a.pl.ViewSeq() >= more })
	seqA, hashA := viewHash(t, a.pl)
	seqB, hashB = viewHash(t, b.pl)
	if seqA != seqB || hashA != hashB {
		t.Fatalf("a at %d %s, b at %d %s", seqA, hashA, seqB, hashB)
	}
	if a.node.Primary() {
		t.Fatal("the rejoined node is primary while b holds the lease")
	}

	// A new node with an empty data dir starts from the bucket's snapshot.
	waitFor(t, "b's snapshot in the bucket", func() bool { return b.pl.StateStats().Snapshots > 0 })
	pub, cancel := context.WithCancel(context.Background())
	go b.fo.PublishSnapshots(pub, b.dir, b.node)
	defer cancel()
	time.Sleep(100 * time.Millisecond)
	d := openAuto(t, c.URL(), "d", t.TempDir())
	defer d.fo.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d.start("")
		if d.pl.Recovery().SnapshotSeq > 0 || time.Now().After(deadline) {
			break
		}
		d.stop() // the snapshot was not in the bucket yet: wipe and retry
		_ = os.RemoveAll(d.dir)
		time.Sleep(200 * time.Millisecond)
	}
	defer d.stop()
	if d.pl.Recovery().SnapshotSeq == 0 {
		t.Fatal("the new node did not bootstrap from a snapshot")
	}
	last := submit(t, b.pl, workload(t, 3), 50)
	waitFor(t, "d catches up", func() bool { return d.pl.ViewSeq() >= last })
	seqD, hashD := viewHash(t, d.pl)
	seqB, hashB = viewHash(t, b.pl)
	if seqD != seqB || hashD != hashB {
		t.Fatalf("d at %d %s, b at %d %s", seqD, hashD, seqB, hashB)
	}
}

// ackedAfter submits a command and says whether it was acknowledged
// within d (a pipeline that refuses it answers no).
func ackedAfter(pl *journal.Pipeline, d time.Duration) bool {
	r := journal.NewReply()
	if _, err := pl.Submit(&core.Command{Kind: core.KindTick}, r); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return pl.WaitContext(ctx, r) == nil
}

// logOf50 is a log of testVenue claimed by "w", holding commands 1..50
// of "log" (cmds).
func logOf50(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	cfg := autoConfig(url, "w")
	cfg.Log.Venue = testVenue
	l, err := replication.Open(ctx, cfg.Log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.Claim(ctx, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(1, cmds("log", 1, 50)); err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPrepareSetsAsideAForeignJournal: a data dir whose WAL shares no
// entry with the log is renamed aside (nothing deleted) and the node
// starts empty; one of another venue is refused with nothing changed.
func TestPrepareSetsAsideAForeignJournal(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logOf50(t, ctx, c.URL())
	fo := openAuto(t, c.URL(), "x", "")
	defer fo.fo.Close()

	_, dir := walWith(t, 1, cmds("other", 1, 30)) // same seqs, other bytes
	if err := fo.fo.Prepare(ctx, dir, "ffffffffffffffffffffffffffffffff"); !errors.Is(err, replication.ErrForeignLog) {
		t.Fatalf("another venue's journal: %v, want ErrForeignLog", err)
	}
	if _, err := os.Stat(filepath.Join(dir, journal.WALDir)); err != nil {
		t.Fatalf("the refused journal was touched: %v", err)
	}
	if err := fo.fo.Prepare(ctx, dir, testVenue); err != nil {
		t.Fatalf("a journal without overlap: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, journal.WALDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the WAL is still in place: %v", err)
	}
	aside, _ := filepath.Glob(filepath.Clean(dir) + ".aside-*")
	if len(aside) != 1 {
		t.Fatalf("set aside: %v", aside)
	}
	w, err := journal.OpenReadOnly(filepath.Join(aside[0], journal.WALDir))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.FirstSeq() != 1 || w.LastSeq() != 30 {
		t.Fatalf("the set-aside WAL holds %d..%d, want 1..30", w.FirstSeq(), w.LastSeq())
	}
}

// TestNextRole: what the serve loop does after each way serve ends.
func TestNextRole(t *testing.T) {
	manual := replication.NodeConfig{Role: replication.RolePrimary}
	for _, tc := range []struct {
		err  error
		cfg  replication.NodeConfig
		want replication.Role
	}{
		{nil, manual, ""},
		{replication.ErrPromoted, manual, replication.RolePrimary},
		{replication.ErrRejoin, manual, replication.RoleStandby},
		{replication.ErrFenced, manual, ""}, // manual: a fenced primary stops; an operator decides
		{errors.New("disk full"), manual, ""},
	} {
		if got := replication.NextRole(tc.err, tc.cfg); got != tc.want {
			t.Errorf("NextRole(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestPrepareWaitsForTheLog: a node that rejoins while the log has no
// quorum (its only server down) waits for it instead of giving up (the
// process would exit and its reads stop), then rejoins.
func TestPrepareWaitsForTheLog(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logOf50(t, ctx, c.URL())
	fo := openAuto(t, c.URL(), "x", "")
	defer fo.fo.Close()
	_, dir := walWith(t, 1, cmds("log", 1, 50), cmds("tail", 51, 60)) // the log's 1..50, then a tail it never stored
	c.StopNode(0)
	done := make(chan error, 1)
	go func() { done <- fo.fo.Prepare(ctx, dir, testVenue) }()
	select {
	case err := <-done:
		t.Fatalf("Prepare returned without the log: %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
	if err := c.StartNode(0); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Prepare once the log is back: %v", err)
	}
	w, err := journal.OpenReadOnly(filepath.Join(dir, journal.WALDir))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.LastSeq() != 50 {
		t.Fatalf("after Prepare the WAL ends at %d, want 50 (its tail discarded)", w.LastSeq())
	}
}

// primaryAndStandby: a, which took the lease and the log, and b, a
// standby that applied a's first 200 commands.
func primaryAndStandby(t *testing.T) (*natstest.Cluster, *autoNode, *autoNode) {
	t.Helper()
	c := natstest.Start(t, 1)
	a := openAuto(t, c.URL(), "a", t.TempDir())
	t.Cleanup(a.fo.Close)
	a.start("")
	waitClosed(t, "a promoted", a.node.Promoted(), 10*time.Second)
	b := openAuto(t, c.URL(), "b", t.TempDir())
	t.Cleanup(b.fo.Close)
	b.start("")
	acked := submit(t, a.pl, workload(t, 1), 200)
	waitFor(t, "b follows", func() bool { return b.pl.ViewSeq() >= acked })
	return c, a, b
}

// TestNoClaimWithoutTheLease: a node promoted in place restarts as the
// primary (serve's loop); if its lease lapsed meanwhile and another node
// took over, the restart must not claim the log: it would fence the
// holder, which no node could then replace. It is refused (ErrLeaseLost:
// the serve loop makes it a standby) and the holder goes on. So is an
// operator's promotion of a node without the lease.
func TestNoClaimWithoutTheLease(t *testing.T) {
	_, a, b := primaryAndStandby(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := b.node.Promote(ctx); !errors.Is(err, replication.ErrLeaseLost) {
		t.Fatalf("an operator's promotion of a node without the lease: %v, want ErrLeaseLost", err)
	}
	if role := replication.NextRole(replication.ErrPromoted, replication.NodeConfig{Role: replication.RoleStandby, Auto: a.fo}); role != replication.RolePrimary {
		t.Fatalf("NextRole(ErrPromoted) = %q", role)
	}
	a.stop()
	if err := a.fo.Lease().Release(ctx); err != nil { // stands for a lease that lapsed during the restart
		t.Fatal(err)
	}
	waitClosed(t, "b takes over", b.node.Promoted(), 10*time.Second)
	more := submit(t, b.pl, workload(t, 2), 100)
	err := a.startAs(replication.RolePrimary, testVenue)
	if err == nil {
		a.stop()
	}
	if !errors.Is(err, replication.ErrLeaseLost) {
		t.Fatalf("a's restart as the primary without the lease: %v, want ErrLeaseLost", err)
	}
	if b.node.Status().Fenced || !ackedAfter(b.pl, 5*time.Second) {
		t.Fatalf("b, the holder, after a's restart: %+v", b.node.Status())
	}
	t.Logf("b holds the lease and acknowledges past %d", more)
	defer b.stop()
}

// TestFencedHolderLetsTheVenueGoOn: a primary fenced by another writer's
// claim while it still holds the lease serves again as a standby (the
// serve loop's ErrRejoin): it must not keep the lease for ever, or no node
// ever takes over again. Within a few TTLs some node is the primary.
func TestFencedHolderLetsTheVenueGoOn(t *testing.T) {
	c, a, b := primaryAndStandby(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := autoConfig(c.URL(), "x")
	cfg.Log.Venue = testVenue
	x, err := replication.Open(ctx, cfg.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	last, tail, err := x.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Claim(ctx, last, tail.Last(), 100); err != nil { // a writer without the lease
		t.Fatal(err)
	}
	if ackedAfter(a.pl, 2*time.Second) {
		t.Fatal("a acknowledged after another writer's claim")
	}
	waitClosed(t, "a's pipeline stops (fenced)", a.pl.Dead(), 5*time.Second)
	if !a.fo.Lease().Held() {
		t.Fatal("a lost the lease: this test needs a fenced holder")
	}
	a.stop()
	if role := replication.NextRole(replication.ErrRejoin, replication.NodeConfig{Role: replication.RolePrimary, Auto: a.fo}); role != replication.RoleStandby {
		t.Fatalf("NextRole(ErrRejoin) = %q", role)
	}
	a.start(testVenue)
	defer a.stop()
	defer b.stop()
	select {
	case <-a.node.Promoted():
	case <-b.node.Promoted():
	case <-time.After(10 * time.Second):
		t.Fatalf("no node took over within 10 s (TTL 800 ms): a holds the lease: %v, b: %v", a.fo.Lease().Held(), b.fo.Lease().Held())
	}
}
