package core

// bench_test.go measures the processor on a realistic mixed stream (60% GTC
// limits near the spread, 30% cancels, 10% marketable orders; 10k funded
// users; two books of ~1k resting orders each) and the command codec. The
// stream is generated once against a processor, so every cancel names a live
// order and replaying it from the same snapshot repeats it exactly.

import (
	"sync"
	"testing"
)

// benchStreamLen is the length of the pre-generated stream. When b.N is
// larger the benchmark restores the pre-stream snapshot (timer stopped),
// which also rewinds LastSeq, so the stream's seqs fit again as they are.
const benchStreamLen = 1 << 18

type benchWorkload struct {
	snap     []byte    // state before the stream
	cmds     []Command // the stream, Seq following the snapshot's LastSeq
	endHash  string    // StateHash after the stream, for TestBenchStreamReplays
	startRes int       // resting orders at the start
	endRes   int       // and at the end
	trades   int
	rejected int
}

var benchW struct {
	once sync.Once
	w    *benchWorkload
}

// benchWorkloadOnce builds the benchmark workload once per process.
func benchWorkloadOnce() *benchWorkload {
	benchW.once.Do(func() { benchW.w = buildWorkload(99, benchProfile, benchStreamLen) })
	return benchW.w
}

func buildWorkload(seed uint64, prof genProfile, n int) *benchWorkload {
	g := newGen(seed, prof)
	p := New(Config{})
	var c Command
	for k := g.setupLen(); k > 0; k-- {
		g.next(&c)
		g.observe(p.Apply(&c))
	}
	w := &benchWorkload{snap: p.AppendSnapshot(nil), cmds: make([]Command, n), startRes: p.orderIdx.len()}
	for i := range w.cmds {
		g.next(&w.cmds[i])
		ev := p.Apply(&w.cmds[i])
		for j := range ev {
			if ev[j].Kind == EvTrade {
				w.trades++
			}
		}
		if ev[len(ev)-1].Code != OK {
			w.rejected++
		}
		g.observe(ev)
	}
	w.endHash, w.endRes = p.StateHash(), p.orderIdx.len()
	return w
}

func mustRestore(tb testing.TB, snap []byte) *Processor {
	p, err := Restore(Config{}, snap)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestBenchStreamReplays checks the benchmark's premise: the stream replays
// from the snapshot to the same state, and it is the mix it claims to be.
func TestBenchStreamReplays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 256k-command benchmark stream")
	}
	w := benchWorkloadOnce()
	p := mustRestore(t, w.snap)
	for i := range w.cmds {
		p.Apply(&w.cmds[i])
	}
	if h := p.StateHash(); h != w.endHash {
		t.Fatalf("replayed stream ends at %s, generation at %s", h, w.endHash)
	}
	if v := p.CheckInvariants(); len(v) != 0 {
		t.Fatalf("invariants: %+v", v)
	}
	t.Logf("resting orders %d -> %d, %.2f trades/command, %.2f%% rejected", w.startRes, w.endRes,
		float64(w.trades)/float64(len(w.cmds)), 100*float64(w.rejected)/float64(len(w.cmds)))
	if w.startRes < 1_500 || w.endRes < 1_000 || w.endRes > 4_000 {
		t.Errorf("the books drifted: %d -> %d resting orders, want ~1k per book", w.startRes, w.endRes)
	}
	if w.rejected > len(w.cmds)/50 {
		t.Errorf("%d of %d commands rejected: the stream measures rejections, not work", w.rejected, len(w.cmds))
	}
}

// BenchmarkProcessorMixed applies the mixed stream; one op is one command.
func BenchmarkProcessorMixed(b *testing.B) {
	w := benchWorkloadOnce()
	benchApplyStream(b, w.snap, w.cmds)
}

// benchApplyStream applies cmds from the state snap, one command per op,
// restoring snap (untimed) each time the stream runs out, and reports
// cmds/s. The body of BenchmarkProcessorMixed and BenchmarkProcessorBinary.
func benchApplyStream(b *testing.B, snap []byte, cmds []Command) {
	p := mustRestore(b, snap)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for n := 0; n < b.N; n++ {
		if i == len(cmds) {
			b.StopTimer()
			p, i = mustRestore(b, snap), 0
			b.StartTimer()
		}
		p.Apply(&cmds[i])
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
}

// benchCodecCmds is a sample of the stream to encode and decode.
func benchCodecCmds() []Command { return benchWorkloadOnce().cmds[:4096] }

func BenchmarkEncodeCommand(b *testing.B) {
	cmds := benchCodecCmds()
	buf := make([]byte, 0, MaxCommandSize)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		buf = EncodeCommand(buf[:0], &cmds[n%len(cmds)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
}

func BenchmarkDecodeCommand(b *testing.B) {
	cmds := benchCodecCmds()
	enc := make([][]byte, len(cmds))
	for i := range cmds {
		enc[i] = EncodeCommand(nil, &cmds[i])
	}
	var c Command
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		if err := DecodeCommand(enc[n%len(enc)], &c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
}

// BenchmarkAppendSnapshot serializes the state at the end of the mixed
// stream (10k funded users, ~2k resting orders), as the pipeline does on
// the processor goroutine every SnapshotEvery commands.
func BenchmarkAppendSnapshot(b *testing.B) {
	w := benchWorkloadOnce()
	p := mustRestore(b, w.snap)
	for i := range w.cmds {
		p.Apply(&w.cmds[i])
	}
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		buf = p.AppendSnapshot(buf[:0])
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}
