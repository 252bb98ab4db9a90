package core

import "testing"

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
