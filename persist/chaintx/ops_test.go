package chaintx_test

// Issue 33 (withdrawals an operator can run), items 4 and 5 on the lease:
// a graceful stop releases the leases, so a restarted node leads at once
// (not after --chain-lease), and two processes started without a node id
// get different ids, so the second is never taken for the first by the
// lease (which renews for its own id).

import (
	"context"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
)

func TestLeaseReleasedOnClose(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	cfg := e.fast(key, "a", e.store)
	cfg.Lease.Duration = 30 * time.Second // far longer than the test: only a release lets "b" lead
	a, err := chaintx.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	la, ok := a.Leader(sub)
	if !ok {
		t.Fatal("a does not lead")
	}
	e.create(a, transfer(sub, "before", anviltest.Addr(0x33), 1))
	a.Close()
	a.Close() // twice: nothing more happens

	cfg.NodeID = "b"
	cfg.Signers = []chaintx.Signer{e.signer(key)}
	b := e.start(cfg) // Start acquires synchronously
	lb, ok := b.Leader(sub)
	if !ok {
		t.Fatal("a restarted node does not lead at once after a graceful stop (the lease was not released)")
	}
	if lb.Token != la.Token+1 || lb.Node != "b" {
		t.Fatalf("lease after the release: %+v, want node b, token %d", lb, la.Token+1)
	}
	tx := e.create(b, transfer(sub, "after", anviltest.Addr(0x33), 1))
	if tx.Nonce == nil || *tx.Nonce != 1 {
		t.Fatalf("the new leader's first tx: %+v (want nonce 1)", tx)
	}
}

func TestDefaultNodeIDsDiffer(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	var ms []*chaintx.Manager
	for range 2 {
		cfg := e.fast(key, "", e.store) // no --chain-node-id
		ms = append(ms, e.start(cfg))
	}
	if ms[0].NodeID() == "" || ms[0].NodeID() == ms[1].NodeID() {
		t.Fatalf("default node ids %q and %q: want two different ids", ms[0].NodeID(), ms[1].NodeID())
	}
	l0, ok0 := ms[0].Leader(sub)
	_, ok1 := ms[1].Leader(sub)
	if !ok0 || ok1 || l0.Node != ms[0].NodeID() {
		t.Fatalf("leaders: first %v (%+v), second %v: want the first only", ok0, l0, ok1)
	}
	// The second stays out while the first renews.
	time.Sleep(400 * time.Millisecond) // > RenewInterval: both renewed at least once
	if _, ok := ms[1].Leader(sub); ok {
		t.Fatal("the second node took the lease of the first")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := ms[1].Create(ctx, transfer(sub, "x", anviltest.Addr(0x33), 1)); err == nil {
		t.Fatal("the node without the lease created a tx")
	}
}
