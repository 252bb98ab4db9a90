package core

// binary_bench_test.go measures settling a binary market of 1M positions
// in MaxSettleSlice slices. The processor on a binary stream
// (BenchmarkProcessorBinary, BenchmarkBinaryVsMixed) is measured in
// binary_stream_bench_test.go, in package core_test: its generator,
// bench/binaryshape, imports core.

import (
	"sync"
	"testing"
	"time"
)

var settleW struct {
	once sync.Once
	snap []byte
	seq  Seq
}

// settleSnapshot is a state with one binary market of 1M positions
// (500k mints between 1M users), resolved YES, its orders gone.
func settleSnapshot(tb testing.TB) ([]byte, Seq) {
	settleW.once.Do(func() {
		p := New(Config{})
		var seq Seq
		apply := func(c Command) {
			seq++
			c.Seq, c.Time = seq, int64(seq)
			if ev := p.Apply(&c); ev[len(ev)-1].Code != OK {
				tb.Fatalf("setup %v: %v", c.Kind, ev[len(ev)-1].Code)
			}
		}
		apply(Command{Kind: KindConfigAsset, Asset: 1, BaseScale: 2})
		apply(Command{Kind: KindConfigBinary, Market: 1, Cfg: MarketCfg{Quote: 1, Lot: 1, MinQty: 1, MaxQty: 1000,
			MakerFee: 1_000, TakerFee: 2_000}})
		apply(Command{Kind: KindActivate, Market: 1})
		const n = 1_000_000
		for u := UserID(1); u <= n; u++ {
			apply(Command{Kind: KindSpotDeposit, User: u, Asset: 1, Amount: 100_000, Key: mkKey("d" + itoa(int(u)))})
		}
		for u := UserID(1); u <= n; u += 2 {
			apply(Command{Kind: KindPlaceOrder, User: u, Market: 1, Side: Buy, Type: Limit, TIF: GTC, Price: 60,
				Qty: 10, Flags: uint8(OutcomeYes)})
			apply(Command{Kind: KindPlaceOrder, User: u + 1, Market: 1, Side: Buy, Type: Limit, TIF: GTC, Price: 40,
				Qty: 10, Flags: uint8(OutcomeNo)})
		}
		apply(Command{Kind: KindResolve, Market: 1, Flags: uint8(OutcomeYes)})
		settleW.snap, settleW.seq = p.AppendSnapshot(nil), seq
	})
	return settleW.snap, settleW.seq
}

// BenchmarkSettle1MPositions settles a market of 1M positions in slices of
// MaxSettleSlice; one op is the whole settlement. It reports the time per
// slice (the longest the processor is busy with one command) and in total.
func BenchmarkSettle1MPositions(b *testing.B) {
	snap, seq := settleSnapshot(b)
	var slices int
	var worst float64
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		p := mustRestore(b, snap)
		s := seq
		b.StartTimer()
		for done := false; !done; {
			s++
			c := Command{Kind: KindSettle, Seq: s, Time: int64(s), Market: 1, Qty: MaxSettleSlice}
			t0 := time.Now()
			ev := p.Apply(&c)
			if d := float64(time.Since(t0).Nanoseconds()); d > worst {
				worst = d
			}
			slices++
			done = ev[len(ev)-2].Kind == EvMarketSettled
			if ev[len(ev)-1].Code != OK {
				b.Fatalf("settle: %v", ev[len(ev)-1].Code)
			}
		}
		if v, _ := p.Binary(1); v.Status != MarketSettled || v.Reserve != 0 {
			b.Fatalf("not settled: %+v", v)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(slices), "ns/slice")
	b.ReportMetric(worst, "worst-ns/slice")
	b.ReportMetric(float64(slices)/float64(b.N), "slices")
}
