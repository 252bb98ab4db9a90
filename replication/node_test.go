package replication_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/replication/natstest"
)

func startNode(t *testing.T, url, id string, role replication.Role) (*replication.Node, *journal.Pipeline) {
	t.Helper()
	return startNodeR(t, url, id, role, 1)
}

// startNodeR is startNode on a stream of the given replicas.
func startNodeR(t *testing.T, url, id string, role replication.Role, replicas int) (*replication.Node, *journal.Pipeline) {
	t.Helper()
	pl := startPipeline(t, journal.Config{Standby: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := replication.StartNode(ctx, replication.NodeConfig{Log: replication.Config{URL: url, Node: id, Replicas: replicas},
		Mode: replication.ModeSync, Role: role, Advertise: "127.0.0.1:80" + id[len(id)-1:], HashEvery: 100, Logger: quiet()}, pl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n, pl
}

// TestNodePromoteAndMetrics: a primary and a standby node; the standby
// knows the primary's address and reaches it; promoted, it is the primary
// (epoch 2) and the old one is fenced; the ubs_replication_* metrics say so.
func TestNodePromoteAndMetrics(t *testing.T) {
	c := natstest.Start(t, 1)
	na, pa := startNode(t, c.URL(), "node-a", replication.RolePrimary)
	nb, pb := startNode(t, c.URL(), "node-b", replication.RoleStandby)
	if err := (&replication.NodeConfig{Mode: "fast", Role: replication.RolePrimary, Log: replication.Config{URL: "x"}}).Validate(); err == nil {
		t.Fatal("an unknown mode was accepted")
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(nb.Collectors()...)
	last := submit(t, pa, workload(t, 1), 500)
	waitFor(t, "the standby", func() bool { return pb.DurableSeq() >= last && nb.Status().LagCmds == 0 })
	waitFor(t, "the primary's state hashes compared", func() bool { return nb.Status().HashesOK >= 4 })
	if s := nb.Status(); s.Role != replication.RoleStandby || s.Primary != "node-a@127.0.0.1:80a" || s.Seq != last || s.Epoch != 1 {
		t.Fatalf("standby status %+v", s)
	}
	if v := testutil.ToFloat64(nb.Collectors()[0]); v != 0 {
		t.Fatalf("ubs_replication_primary = %v on the standby", v)
	}
	if !na.Primary() || nb.Primary() {
		t.Fatal("roles wrong before the promotion")
	}
	if epoch, err := nb.Promote(context.Background()); err != nil || epoch != 2 {
		t.Fatalf("promote: epoch %d, %v", epoch, err)
	}
	select {
	case <-nb.Promoted():
	default:
		t.Fatal("Promoted not closed after the promotion")
	}
	if nb.PrimaryAddr() != "127.0.0.1:80b" || na.PrimaryAddr() != "127.0.0.1:80a" {
		t.Fatalf("primary addresses: b says %q, a says %q", nb.PrimaryAddr(), na.PrimaryAddr())
	}
	if _, err := nb.Promote(context.Background()); !errors.Is(err, replication.ErrAlreadyPrimary) {
		t.Fatalf("second promote: %v", err)
	}
	if _, ok := acked(t, pa, 5*time.Second); ok {
		t.Fatal("the old primary acknowledged a command after the promotion")
	}
	if na.Primary() || !na.Status().Fenced || !nb.Primary() {
		t.Fatalf("after the promotion: a primary %v (fenced %v), b primary %v", na.Primary(), na.Status().Fenced, nb.Primary())
	}
	more := submit(t, pb, workload(t, 2), 10)
	if s := nb.Status(); s.Role != replication.RolePrimary || s.Epoch != 2 || s.Seq != more {
		t.Fatalf("new primary status %+v (want epoch 2, seq %d)", s, more)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 10 {
		t.Fatalf("metrics: %d, %v", n, err)
	}
	if v := testutil.ToFloat64(nb.Collectors()[1]); v != 2 {
		t.Fatalf("ubs_replication_epoch = %v, want 2", v)
	}
}

// TestPromoteWaitsForTheLog: an operator's promotion while the log has no
// quorum (two of three NATS nodes down; the moment just after one returns
// answers "JetStream system temporarily unavailable") tries again until
// its context ends, rather than failing at the first refused read: it
// completes once a quorum is back, holding every acknowledged command.
func TestPromoteWaitsForTheLog(t *testing.T) {
	t.Parallel()
	c := natstest.Start(t, 3)
	if err := c.WaitReady(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	_, pa := startNodeR(t, c.URL(), "node-a", replication.RolePrimary, 3)
	nb, pb := startNodeR(t, c.URL(), "node-b", replication.RoleStandby, 3)
	last := submit(t, pa, workload(t, 1), 300)
	waitFor(t, "the standby", func() bool { return pb.DurableSeq() >= last })
	c.StopNode(1)
	c.StopNode(2)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	type result struct {
		epoch uint64
		err   error
	}
	done := make(chan result, 1)
	go func() { e, err := nb.Promote(ctx); done <- result{e, err} }()
	select {
	case r := <-done:
		t.Fatalf("the promotion ended without a quorum: epoch %d, %v", r.epoch, r.err)
	case <-time.After(3 * time.Second):
	}
	if err := c.StartNode(1); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.epoch != 2 {
		t.Fatalf("promote once a quorum is back: epoch %d, %v", r.epoch, r.err)
	}
	if got := pb.DurableSeq(); got < last {
		t.Fatalf("the promoted node holds seq %d, below the acknowledged %d", got, last)
	}
	if err := c.StartNode(2); err != nil {
		t.Fatal(err)
	}
}

// TestPromoteOfAClosedNode: a node that is closing (the process stopping
// while a promote request runs) promotes nothing: at once, with
// ErrNodeClosed, and the log keeps the live primary's claim — whether its
// connection is still draining or closed.
func TestPromoteOfAClosedNode(t *testing.T) {
	for _, drained := range []bool{false, true} {
		c := natstest.Start(t, 1)
		na, pa := startNode(t, c.URL(), "node-a", replication.RolePrimary)
		nb, pb := startNode(t, c.URL(), "node-b", replication.RoleStandby)
		last := submit(t, pa, workload(t, 1), 100)
		waitFor(t, "the standby", func() bool { return pb.DurableSeq() >= last })
		nb.Close()
		if drained {
			time.Sleep(time.Second)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t0 := time.Now()
		_, err := nb.Promote(ctx)
		cancel()
		if d := time.Since(t0); !errors.Is(err, replication.ErrNodeClosed) || d > 2*time.Second {
			t.Fatalf("drained %v: promote of a closed node: %v after %v (want ErrNodeClosed at once)", drained, err, d)
		}
		if !na.Primary() || na.Status().Fenced {
			t.Fatalf("drained %v: the live primary was fenced by a closed node", drained)
		}
	}
}

// TestFailedPromotionFollowsAgain: an operator's promotion that cannot
// complete (no quorum until its context ends) leaves the node a standby
// that follows the log again. Its claim may still land once the quorum is
// back (a publish the stream's leader had proposed): then the old primary
// is fenced and the standby reads its own claim; else the primary goes on
// and what it appends reaches the standby.
func TestFailedPromotionFollowsAgain(t *testing.T) {
	t.Parallel()
	c := natstest.Start(t, 3)
	if err := c.WaitReady(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	na, pa := startNodeR(t, c.URL(), "node-a", replication.RolePrimary, 3)
	nb, pb := startNodeR(t, c.URL(), "node-b", replication.RoleStandby, 3)
	last := submit(t, pa, workload(t, 1), 200)
	waitFor(t, "the standby", func() bool { return pb.DurableSeq() >= last })
	c.StopNode(1)
	c.StopNode(2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := nb.Promote(ctx)
	cancel()
	if err == nil || nb.Primary() {
		t.Fatalf("promote without a quorum: %v (primary %v)", err, nb.Primary())
	}
	if err := c.StartNode(1); err != nil {
		t.Fatal(err)
	}
	if err := c.StartNode(2); err != nil {
		t.Fatal(err)
	}
	if seq, ok := acked(t, pa, 30*time.Second); ok {
		waitFor(t, "the standby following the primary again", func() bool { return pb.DurableSeq() >= seq })
		return
	}
	// The late claim landed: the standby read it while following.
	waitFor(t, "the standby following its own late claim", func() bool {
		return na.Status().Fenced && nb.Status().Epoch == 2 && !nb.Primary()
	})
}
