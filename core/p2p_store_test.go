package core

import (
	"strconv"
	"testing"
)

// TestP2PStoreAcrossChunks: transfers past one p2pStore chunk keep their
// ids, fields, history, heap positions (a cancel in the second chunk, then
// a tick executing all in (executeAt, id) order) and snapshot, with the
// full invariant check at the end.
func TestP2PStoreAcrossChunks(t *testing.T) {
	p := New(Config{})
	seq, now := Seq(0), t0
	apply := func(c Command) Event {
		t.Helper()
		seq++
		c.Seq, c.Time = seq, now
		evs := p.Apply(&c)
		return evs[len(evs)-1]
	}
	apply(Command{Kind: KindConfigAsset, Asset: usd, BaseScale: 2})
	const n = 2*p2pChunk + 10
	senders := n/MaxP2PPendingPerUser + 1
	for u := 1; u <= senders+1; u++ {
		if r := apply(Command{Kind: KindP2PCreateUser, User: UserID(u), Text: "user" + strconv.Itoa(u), Asset: usd, Amount: 1 << 30}); r.Code != OK {
			t.Fatalf("user %d: %v", u, r.Code)
		}
	}
	to := UserID(senders + 1)
	for i := range n {
		now++
		from := UserID(i/MaxP2PPendingPerUser + 1)
		r := apply(Command{Kind: KindP2PTransfer, User: from, OrderID: OrderID(to), Asset: usd, Amount: Units(i + 1), Qty: Units(hold)})
		if r.Code != OK || uint64(r.OrderID) != uint64(i+1) {
			t.Fatalf("transfer %d: %v id %d", i, r.Code, r.OrderID)
		}
	}
	for id := uint64(1); id <= n; id++ {
		tr, ok := p.P2PTransferByID(id)
		if !ok || tr.ID != id || tr.Amount != Units(id) || tr.Status != P2PPending || tr.To != to {
			t.Fatalf("transfer %d: %+v %v", id, tr, ok)
		}
	}
	if _, ok := p.P2PTransferByID(n + 1); ok {
		t.Fatal("a transfer past the last")
	}
	if h, total, _ := p.P2PHistory(to, 0, n+5, nil); len(h) != n || total != n || h[0].ID != n || h[n-1].ID != 1 {
		t.Fatalf("recipient history: %d of %d, want %d newest first", len(h), total, n)
	}
	cancelled := uint64(p2pChunk + 7)
	c, _ := p.P2PTransferByID(cancelled)
	if r := apply(Command{Kind: KindP2PCancel, User: c.From, OrderID: OrderID(cancelled)}); r.Code != OK {
		t.Fatalf("cancel: %v", r.Code)
	}
	q, err := Restore(Config{}, p.AppendSnapshot(nil))
	if err != nil || q.StateHash() != p.StateHash() {
		t.Fatalf("snapshot round trip: %v", err)
	}
	now += hold
	if r := apply(Command{Kind: KindP2PTick}); r.Qty != n-1 {
		t.Fatalf("tick executed %d, want %d", r.Qty, n-1)
	}
	var last int64
	for id := uint64(1); id <= n; id++ {
		tr, _ := p.P2PTransferByID(id)
		switch {
		case id == cancelled:
			if tr.Status != P2PCancelled {
				t.Fatalf("cancelled transfer is %v", tr.Status)
			}
		case tr.Status != P2PCompleted:
			t.Fatalf("transfer %d is %v", id, tr.Status)
		default:
			last = tr.DoneAt
		}
	}
	if last != now {
		t.Fatalf("done at %d, want %d", last, now)
	}
	if vs := p.CheckInvariants(); len(vs) != 0 {
		t.Fatalf("violations %+v", vs)
	}
}
