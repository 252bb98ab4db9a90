package core

import (
	"bytes"
	"errors"
	"testing"
)

// BenchmarkP2PExecute: one tick executing up to MaxP2PExecPerTick due
// transfers (hold debited, recipient credited, events); reported per
// transfer. `bench p2p` measures the same over 1M transfers on CPU time.
func BenchmarkP2PExecute(b *testing.B) {
	p := New(Config{})
	seq := Seq(0)
	apply := func(c Command) Event {
		seq++
		c.Seq, c.Time = seq, int64(seq)
		evs := p.Apply(&c)
		return evs[len(evs)-1]
	}
	apply(Command{Kind: KindConfigAsset, Asset: 1, BaseScale: 2})
	const senders = 200
	for u := UserID(1); u <= senders+1; u++ {
		apply(Command{Kind: KindP2PCreateUser, User: u, Text: "user" + itoa(int(u)), Asset: 1, Amount: 1 << 50})
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		b.StopTimer()
		n := min(b.N-done, MaxP2PExecPerTick)
		for i := 0; i < n; i++ {
			from := UserID(i%senders + 1)
			apply(Command{Kind: KindP2PTransfer, User: from, OrderID: OrderID(from + 1), Asset: 1, Amount: 1})
		}
		b.StartTimer()
		if r := apply(Command{Kind: KindP2PTick}); int(r.Qty) != n {
			b.Fatalf("executed %d of %d", r.Qty, n)
		}
		done += n
	}
}

// BenchmarkRestoreP2PUsers: Restore of a snapshot holding 200k spec 003
// users (their accounts, handles) and 20k PENDING transfers; reported per
// restore (issue 39 item 4: three restores at start-up).
func BenchmarkRestoreP2PUsers(b *testing.B) {
	p := New(Config{})
	seq := Seq(0)
	apply := func(c Command) {
		seq++
		c.Seq, c.Time = seq, int64(seq)
		if evs := p.Apply(&c); evs[len(evs)-1].Code != OK {
			b.Fatalf("%v: %v", c.Kind, evs[len(evs)-1].Code)
		}
	}
	apply(Command{Kind: KindConfigAsset, Asset: 1, BaseScale: 2})
	const users = 200_000
	for u := 0; u < users; u++ {
		apply(Command{Kind: KindP2PCreateUser, User: UserID(1000 + u), Text: "user" + itoa(u), Asset: 1, Amount: 1_000_000})
	}
	for i := 0; i < users/10; i++ {
		apply(Command{Kind: KindP2PTransfer, User: UserID(1000 + i), OrderID: OrderID(1000 + (i+1)%users), Asset: 1, Amount: 1, Qty: MaxP2PHold})
	}
	snap := p.AppendSnapshot(nil)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := Restore(Config{}, snap); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRestoreRefusesDuplicateHandle: a snapshot whose two spec 003 users
// share a handle is refused (readP2P's duplicate check, now by the maps'
// lengths after one insert each).
func TestRestoreRefusesDuplicateHandle(t *testing.T) {
	p := New(Config{})
	seq := Seq(0)
	for _, c := range []Command{{Kind: KindConfigAsset, Asset: 1, BaseScale: 2},
		{Kind: KindP2PCreateUser, User: 1000, Text: "handleqx1", Asset: 1, Amount: 10},
		{Kind: KindP2PCreateUser, User: 1001, Text: "handleqx2", Asset: 1, Amount: 10}} {
		seq++
		c.Seq, c.Time = seq, int64(seq)
		if evs := p.Apply(&c); evs[len(evs)-1].Code != OK {
			t.Fatalf("%v: %v", c.Kind, evs[len(evs)-1].Code)
		}
	}
	snap := p.AppendSnapshot(nil)
	if _, err := Restore(Config{}, snap); err != nil {
		t.Fatalf("the snapshot itself: %v", err)
	}
	if bytes.Count(snap, []byte("handleqx2")) != 1 {
		t.Fatal("the handle is not in the snapshot exactly once")
	}
	bad := bytes.Replace(snap, []byte("handleqx2"), []byte("handleqx1"), 1)
	if _, err := Restore(Config{}, bad); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("a duplicate handle restored: %v", err)
	}
}
