package core_test

// binary_stream_bench_test.go measures the processor on binary markets
// with the shape of BenchmarkProcessorMixed (10k funded users, two books of
// ~1k resting orders each): 60% GTC limits near the spread on random
// outcomes and sides (sells of shares the user holds), 30% cancels, 8%
// marketable IOCs, 2% refusals (oversell, bad price); the fills are a mix of
// mint, transfer and burn. The stream is package binaryshape's (seed 77,
// 2^18 commands), shared with `bench processor --shape binary`.

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/bench/binaryshape"
	"github.com/ubscore/ubscore/core"
)

var binW struct {
	once sync.Once
	w    *binaryshape.Workload
	err  error
}

func binaryWorkload(tb testing.TB) *binaryshape.Workload {
	binW.once.Do(func() { binW.w, binW.err = binaryshape.Generate(binaryshape.Config{Seed: binaryshape.DefaultSeed}) })
	if binW.err != nil {
		tb.Fatal(binW.err)
	}
	return binW.w
}

func restore(tb testing.TB, snap []byte) *core.Processor {
	p, err := core.Restore(core.Config{}, snap)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestBinaryBenchStream checks the binary benchmark's premise: it replays
// from its snapshot to the same state, keeps ~1k orders per book, has all
// four fill kinds, few refusals, and allocates nothing per command.
func TestBinaryBenchStream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 256k-command binary benchmark stream")
	}
	w := binaryWorkload(t)
	p := restore(t, w.Snap)
	var kinds [5]int
	for i := range w.Cmds {
		ev := p.Apply(&w.Cmds[i])
		for j := range ev {
			if ev[j].Kind == core.EvTrade {
				kinds[ev[j].Flags]++
			}
		}
	}
	if h := p.StateHash(); h != w.EndHash {
		t.Fatalf("replayed stream ends at %s, generation at %s", h, w.EndHash)
	}
	if v := p.CheckInvariants(); len(v) != 0 {
		t.Fatalf("invariants: %+v", v)
	}
	n := len(w.Cmds)
	t.Logf("resting %d -> %d, %.2f trades/command (transfer YES %d, NO %d, mint %d, burn %d), %.2f%% rejected",
		w.StartResting, w.EndResting, float64(w.Mix.Trades)/float64(n), kinds[1], kinds[2], kinds[3], kinds[4],
		100*float64(w.Mix.Rejected)/float64(n))
	if w.EndResting < 1_000 || w.EndResting > 4_000 {
		t.Errorf("the books drifted: %d -> %d resting orders", w.StartResting, w.EndResting)
	}
	for k := core.FillTransferYes; k <= core.FillBurn; k++ {
		if kinds[k] < n/100 {
			t.Errorf("fill kind %v: only %d", k, kinds[k])
		}
	}
	if w.Mix.Rejected > n/20 {
		t.Errorf("%d of %d rejected", w.Mix.Rejected, n)
	}
	if core.RaceEnabled() {
		t.Skip("allocation counts are not meaningful under -race")
	}
	q := restore(t, w.Snap)
	for i := 0; i < 20_000; i++ { // warm: the event buffer and pool at their working size
		q.Apply(&w.Cmds[i])
	}
	i := 20_000
	before := core.Mallocs()
	for ; i < 120_000; i++ {
		q.Apply(&w.Cmds[i])
	}
	if a := core.Mallocs() - before; a > 100 {
		t.Errorf("%d allocations in 100k binary commands", a)
	}
}

// BenchmarkProcessorBinary applies the binary stream; one op is one command.
func BenchmarkProcessorBinary(b *testing.B) {
	w := binaryWorkload(b)
	core.BenchApplyStream(b, w.Snap, w.Cmds)
}

// BenchmarkBinaryVsMixed runs the binary stream and BenchmarkProcessorMixed's
// stream in alternating chunks of 8k commands and reports the median over
// the chunk pairs of binary throughput / mixed throughput ("ratio"): on a
// shared, loaded machine the two see the same load, which separate
// benchmark runs do not. One op is one chunk pair.
func BenchmarkBinaryVsMixed(b *testing.B) {
	const chunk = 8_192
	msnap, mcmds := core.MixedBenchStream()
	bw := binaryWorkload(b)
	mp, bp := restore(b, msnap), restore(b, bw.Snap)
	mi, bi := 0, 0
	var ratios []float64
	run := func(p **core.Processor, snap []byte, cmds []core.Command, i *int) time.Duration {
		if *i+chunk > len(cmds) {
			*p, *i = restore(b, snap), 0
		}
		t0 := time.Now()
		for k := 0; k < chunk; k++ {
			(*p).Apply(&cmds[*i])
			*i++
		}
		return time.Since(t0)
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		dm := run(&mp, msnap, mcmds, &mi)
		db := run(&bp, bw.Snap, bw.Cmds, &bi)
		ratios = append(ratios, float64(dm)/float64(db))
	}
	b.StopTimer()
	sort.Float64s(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
}
