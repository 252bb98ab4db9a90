package core

// FuzzRestore: the snapshot decoder (versions 1 to 4) never panics on any
// input, and whatever it accepts — including states whose aggregates break
// invariants, which recovery must be able to load and check — survives the
// full check without panicking and re-encodes to a snapshot that restores
// to the same state.

import (
	"math"
	"os"
	"runtime"
	"testing"
	"unsafe"
)

func FuzzRestore(f *testing.F) {
	if v1, err := os.ReadFile("testdata/snapshot_v1.bin"); err == nil {
		f.Add(v1)
	}
	p := New(Config{AllowFaults: true})
	seq := Seq(0)
	for _, c := range v1Commands() {
		seq++
		c.Seq = seq
		p.Apply(&c)
	}
	f.Add(p.AppendSnapshot(nil))
	seq++
	drift := Command{Seq: seq, Kind: KindFault, Flags: uint8(FaultLevelDrift), Market: 1, Side: Sell, Amount: 3}
	p.Apply(&drift)
	f.Add(p.AppendSnapshot(nil))
	f.Add(New(Config{}).AppendSnapshot(nil))
	f.Add(binarySeedSnapshot(f)) // version 4: binary markets in every phase, with questions
	if v3, err := os.ReadFile("testdata/snapshot_v3.bin"); err == nil {
		f.Add(v3)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := Restore(Config{}, b)
		if err != nil {
			return
		}
		q.CheckInvariants()
		again, err := Restore(Config{}, q.AppendSnapshot(nil))
		if err != nil {
			t.Fatalf("the re-encoding of an accepted snapshot is refused: %v", err)
		}
		if again.StateHash() != q.StateHash() {
			t.Fatal("a re-encoded snapshot restores to another state")
		}
	})
}

// TestRestoreCorruptCountsAllocateLittle: a snapshot whose markets claim
// MaxInt32 resting orders but hold none, followed by padding. Restore
// rejects it, and its staging buffers' size hints (one budget for every
// market) must not have allocated more than a small multiple of the input
// first: one hint per market, each bounded by the bytes left, allocated
// ~3,000x the input (a reviewer's test).
func TestRestoreCorruptCountsAllocateLittle(t *testing.T) {
	p := New(Config{})
	seq := Seq(0)
	do := func(c Command) {
		seq++
		c.Seq = seq
		ev := p.Apply(&c)
		if ev[len(ev)-1].Code != OK {
			t.Fatalf("%v: %v", c.Kind, ev[len(ev)-1].Code)
		}
	}
	do(Command{Kind: KindConfigAsset, Asset: 1})
	do(Command{Kind: KindConfigAsset, Asset: 2})
	for m := MarketID(1); m <= MaxMarkets; m++ {
		do(Command{Kind: KindConfigMarket, Market: m, Cfg: MarketCfg{Base: 1, Quote: 2, Tick: 1, Lot: 1, MinQty: 1, MaxQty: 1000}})
		p.markets[m].orders = math.MaxInt32 // corrupt count
	}
	snap := p.AppendSnapshot(nil)
	snap = append(snap, make([]byte, 1<<20)...) // 1 MiB of trailing garbage
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	_, err := Restore(Config{}, snap)
	runtime.ReadMemStats(&b)
	alloc := b.TotalAlloc - a.TotalAlloc
	t.Logf("snapshot %d bytes, sizeof(order)=%d, Restore err=%v, allocated %d MiB (%.0fx the input)",
		len(snap), unsafe.Sizeof(order{}), err, alloc>>20, float64(alloc)/float64(len(snap)))
	if err == nil {
		t.Fatal("Restore accepted trailing garbage")
	}
	if alloc > 32*uint64(len(snap)) {
		t.Errorf("a rejected %d-byte snapshot made Restore allocate %d MiB", len(snap), alloc>>20)
	}
}
