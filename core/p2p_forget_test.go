package core

import (
	"testing"
)

// The retention of finished transfers (KindP2PForget): what a forget drops
// and keeps, that replay and a restored snapshot forget exactly the same
// (state hash), history pages across the boundary, requestIds inside and
// after the retention, and the transfer limit counting retained ones only.

// forget applies a KindP2PForget at cutoff and returns how many it forgot.
func (d *p2pDrv) forget(cutoff int64) int {
	d.t.Helper()
	return int(result(d.must(Command{Kind: KindP2PForget, Price: Price(cutoff)}, OK)).Qty)
}

// replayHash applies log to a fresh processor and returns its state hash.
func replayHash(t *testing.T, log []Command) string {
	t.Helper()
	p := New(Config{})
	for i := range log {
		c := log[i]
		p.Apply(&c)
	}
	return p.StateHash()
}

func TestP2PForgetRetention(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 1000)
	b := d.user(0, "bob", 1000)
	c := d.user(0, "carol", 1000)
	done := d.create(xfer(a, b, 10, "r1")) // COMPLETED at t0+hold
	x := d.create(xfer(a, c, 20, ""))      // CANCELLED at once
	d.must(Command{Kind: KindP2PCancel, User: a, OrderID: OrderID(x)}, OK)
	d.must(Command{Kind: KindSetAccountStatus, User: c, Status: Frozen}, OK)
	failed := d.create(xfer(b, c, 5, "")) // DEBIT_FAILED (recipient frozen)
	d.now += hold
	d.must(Command{Kind: KindP2PTick}, OK)
	d.must(Command{Kind: KindSetAccountStatus, User: c, Status: Active}, OK)
	tFinished := d.now
	d.now++
	pend := d.create(xfer(b, a, 7, "")) // PENDING: never forgotten
	if d.status(done) != P2PCompleted || d.status(x) != P2PCancelled || d.status(failed) != P2PDebitFailed {
		t.Fatal("setup")
	}
	beforeSnap := d.p.AppendSnapshot(nil)
	beforeLog := len(d.log)

	if n := d.forget(t0 - 1); n != 0 { // nothing finished that early
		t.Fatalf("forgot %d before any finished", n)
	}
	if n := d.forget(tFinished); n != 3 {
		t.Fatalf("forgot %d, want 3", n)
	}
	for _, id := range []uint64{done, x, failed} {
		if _, ok := d.p.P2PTransferByID(id); ok {
			t.Fatalf("transfer %d still retained", id)
		}
	}
	if d.status(pend) != P2PPending {
		t.Fatal("the pending transfer was touched")
	}
	if st := d.p.P2PStats(); st.Transfers != 1 || st.Made != 4 || st.Finished != 0 || st.Pending != 1 {
		t.Fatalf("stats %+v", st)
	}
	d.must(Command{Kind: KindP2PCancel, User: a, OrderID: OrderID(x)}, CodeTransferNotFound)
	// a forget is a sequenced command: replay reaches the same state at the same seq
	if got := replayHash(t, d.log); got != d.p.StateHash() {
		t.Fatal("replay of the log differs from the live state after the forget")
	}
	// so does a snapshot taken before it, restored, with the forget replayed
	q, err := Restore(Config{}, beforeSnap)
	if err != nil {
		t.Fatal(err)
	}
	for i := beforeLog; i < len(d.log); i++ {
		cmd := d.log[i]
		q.Apply(&cmd)
	}
	if q.StateHash() != d.p.StateHash() {
		t.Fatal("restore + replay of the forget differs")
	}
	// and a snapshot after it round-trips
	r, err := Restore(Config{}, d.p.AppendSnapshot(nil))
	if err != nil || r.StateHash() != d.p.StateHash() {
		t.Fatalf("round trip after the forget: %v", err)
	}
	// the future agrees too: the pending one executes in all three
	d.now += hold
	d.must(Command{Kind: KindP2PTick}, OK)
	if got := replayHash(t, d.log); got != d.p.StateHash() {
		t.Fatal("replay differs after the next tick")
	}
}

func TestP2PForgetRequestID(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 1000)
	b := d.user(0, "bob", 1000)
	first := d.create(xfer(a, b, 10, "pay-1"))
	d.now += hold
	d.must(Command{Kind: KindP2PTick}, OK)
	// inside the retention a repeat answers the first transfer (not a new one)
	evs := d.must(xfer(a, b, 10, "pay-1"), OK)
	if id := uint64(result(evs).OrderID); id != first {
		t.Fatalf("repeat inside the retention: transfer %d, want %d", id, first)
	}
	if d.bal(a).Avail != 990 {
		t.Fatalf("repeat moved money: %+v", d.bal(a))
	}
	d.must(xfer(a, b, 11, "pay-1"), CodeReqIDConflict)
	d.now++
	if d.forget(d.now-1) != 1 {
		t.Fatal("not forgotten")
	}
	// after it the requestId is free: the documented exception, a new transfer
	second := d.create(xfer(a, b, 10, "pay-1"))
	if second == first || d.status(second) != P2PPending || d.bal(a).Frozen != 10 {
		t.Fatalf("repeat after the retention: transfer %d (first %d), balance %+v", second, first, d.bal(a))
	}
}

// TestP2PForgetLimit: with the limit lowered, finished and forgotten
// transfers no longer count toward TOO_MANY_TRANSFERS.
func TestP2PForgetLimit(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 1000)
	b := d.user(0, "bob", 1000)
	defer func(tot int) { p2pTransferLimit = tot }(p2pTransferLimit)
	p2pTransferLimit = 3
	for range 3 {
		d.create(xfer(a, b, 1, ""))
	}
	d.must(xfer(a, b, 1, ""), CodeTooManyTransfers)
	d.now += hold
	d.must(Command{Kind: KindP2PTick}, OK)
	d.must(xfer(a, b, 1, ""), CodeTooManyTransfers) // finished but retained: still counted
	d.forget(d.now)
	for range 3 {
		d.create(xfer(a, b, 1, ""))
	}
	d.must(xfer(a, b, 1, ""), CodeTooManyTransfers)
}

// TestP2PForgetHistory: pages of a user's history are answered by the core
// only while every transfer on them is retained (the newest ones, above
// the largest forgotten id); a forget out of id order (a cancel finishes
// before older pending ones) leaves tombstones the pages never show.
func TestP2PForgetHistory(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 10_000)
	b := d.user(0, "bob", 10_000)
	var ids []uint64
	for range 6 {
		ids = append(ids, d.create(xfer(a, b, 1, "")))
	}
	// the 5th is cancelled at once: it finishes first
	d.must(Command{Kind: KindP2PCancel, User: a, OrderID: OrderID(ids[4])}, OK)
	d.now++
	if d.forget(d.now-1) != 1 {
		t.Fatal("the cancelled transfer was not forgotten")
	}
	page, total, ok := d.p.P2PHistory(a, 0, 1, nil)
	if !ok || total != 6 || len(page) != 1 || page[0].ID != ids[5] {
		t.Fatalf("newest page: ok %v total %d %+v", ok, total, page)
	}
	if _, _, ok := d.p.P2PHistory(a, 0, 2, nil); ok {
		t.Fatal("a page reaching the forgotten transfer was answered by the core")
	}
	if _, _, ok := d.p.P2PHistory(a, 6, 2, nil); !ok {
		t.Fatal("a page past the end needs no archive")
	}
	var retained []uint64
	if n := d.p.P2PEachRetained(a, func(t *P2PTransfer) bool { retained = append(retained, t.ID); return true }); n != 1 {
		t.Fatalf("forgotten count %d", n)
	}
	if len(retained) != 5 || retained[0] != ids[5] || retained[1] != ids[3] || retained[4] != ids[0] {
		t.Fatalf("retained %v", retained)
	}
	d.now += hold
	d.must(Command{Kind: KindP2PTick}, OK)
	d.now++
	if d.forget(d.now-1) != 5 {
		t.Fatal("the rest was not forgotten")
	}
	if _, total, ok := d.p.P2PHistory(a, 0, 10, nil); ok || total != 6 {
		t.Fatalf("all forgotten: ok %v total %d", ok, total)
	}
	if len(d.p.p2p.byUser) != 0 || len(d.p.p2p.transfers.chunks) > 1 {
		t.Fatalf("memory kept: %d histories, %d chunks", len(d.p.p2p.byUser), len(d.p.p2p.transfers.chunks))
	}
	if got := replayHash(t, d.log); got != d.p.StateHash() {
		t.Fatal("replay differs")
	}
	d.must(Command{Kind: KindP2PForget}, CodeInvalidCommand)
	d.must(Command{Kind: KindP2PForget, Price: 1, User: a}, CodeInvalidCommand)
}
