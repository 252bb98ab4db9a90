package core

// BenchmarkFullCheck measures the full invariant check (what the periodic
// check runs on the replica every --core-check-interval) on a large state:
// 1M resting orders in one book (500k bids, 500k asks, 10 per level) and
// 1M accounts. Spec 004 §7.1 alerts when its p99 exceeds 100 ms; the
// benchmark reports p50 and p99 over its iterations.

import (
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// bigState builds a processor with users accounts, each with one resting
// order (even users buy, odd ones sell) in market 1.
func bigState(tb testing.TB, users int) *Processor {
	p := New(Config{})
	seq := Seq(0)
	apply := func(c Command) {
		seq++
		c.Seq, c.Time = seq, int64(seq)
		if r := p.Apply(&c); r[len(r)-1].Code != OK {
			tb.Fatalf("%v: %v", c.Kind, r[len(r)-1].Code)
		}
	}
	apply(Command{Kind: KindConfigAsset, Asset: 1})
	apply(Command{Kind: KindConfigAsset, Asset: 2})
	apply(Command{Kind: KindConfigMarket, Market: 1, Cfg: MarketCfg{Base: 1, Quote: 2, Tick: 1, Lot: 1, MinQty: 1,
		MaxQty: 1_000, MakerFee: 1_000, TakerFee: 2_000}})
	const levels = 50_000 // per side
	for u := 1; u <= users; u++ {
		c := Command{Kind: KindPlaceOrder, User: UserID(u), Market: 1, Type: Limit, TIF: GTC, Qty: 3}
		lvl := Price((u / 2) % levels)
		if u%2 == 0 {
			apply(Command{Kind: KindSpotDeposit, User: UserID(u), Asset: 2, Amount: 1_000_000, Key: benchKey(u)})
			c.Side, c.Price = Buy, 100_000-lvl
		} else {
			apply(Command{Kind: KindSpotDeposit, User: UserID(u), Asset: 1, Amount: 1_000, Key: benchKey(u)})
			c.Side, c.Price = Sell, 100_001+lvl
		}
		apply(c)
	}
	return p
}

func benchKey(u int) Key {
	var k Key
	copy(k[:], "dep-")
	for i, n := 4, u; n > 0; i, n = i+1, n/10 {
		k[i] = byte('0' + n%10)
	}
	return k
}

func BenchmarkFullCheck(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 20_000
	}
	p := bigState(b, n)
	if p.orderIdx.len() != n || len(p.accounts) != n+1 {
		b.Fatalf("%d orders, %d accounts", p.orderIdx.len(), len(p.accounts))
	}
	if v := p.CheckInvariants(); len(v) != 0 { // also warms the check's buffers
		b.Fatalf("violations %+v", v)
	}
	b.ReportAllocs()
	// Wall time, and the thread's own CPU time: on this shared 2-core VM the
	// wall time includes waiting for a core; the CPU time is what the check
	// costs on a core of its own.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var wall, cpu []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0, c0 := time.Now(), threadCPU(b)
		if v := p.CheckInvariants(); len(v) != 0 {
			b.Fatal(v)
		}
		wall, cpu = append(wall, time.Since(t0)), append(cpu, threadCPU(b)-c0)
	}
	b.StopTimer()
	pct := func(ds []time.Duration, q int) float64 {
		slices.Sort(ds)
		return float64(ds[(len(ds)-1)*q/100].Microseconds()) / 1e3
	}
	b.ReportMetric(pct(wall, 50), "p50-ms")
	b.ReportMetric(pct(wall, 99), "p99-ms")
	b.ReportMetric(pct(cpu, 50), "cpu-p50-ms")
	b.ReportMetric(pct(cpu, 99), "cpu-p99-ms")
	b.ReportMetric(0, "ns/op") // the percentiles are the result
}

// threadCPU is the calling thread's CPU time (user + system).
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const rusageThread = 1 // RUSAGE_THREAD (Linux)
