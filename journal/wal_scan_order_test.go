package journal

// wal_scan_order_test.go: segments are verified concurrently at open, but
// the error reported must be the first problem in seq order, as a scan
// from the front would find it, whichever worker finishes first.

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWALScanReportsFirstDamageInSeqOrder(t *testing.T) {
	r := walTestRand(t)
	base, segs := walTestBuild(t, 600, 1024)
	if len(segs) < 6 {
		t.Fatalf("%d segments; want >= 6", len(segs))
	}
	flip := func(dir string, k int) uint64 {
		path := filepath.Join(dir, filepath.Base(segs[k]))
		frames := walTestFrames(t, path)
		e := r.IntN(len(frames) - 1)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[frames[e]+r.Int64N(frames[e+1]-frames[e])] ^= 1 << r.IntN(8)
		if err := os.WriteFile(path, b, 0o640); err != nil {
			t.Fatal(err)
		}
		return walSegIndex(t, segs[k]) + uint64(e)
	}
	for i := 0; i < 20; i++ {
		dir := walTestCopyDir(t, base)
		// two or three damaged segments before the last, in random order
		ks := r.Perm(len(segs) - 1)[:2+r.IntN(2)]
		first := ^uint64(0)
		for _, k := range ks {
			first = min(first, flip(dir, k))
		}
		walTestExpectCorrupt(t, dir, first)
	}
	// A missing segment after a damaged one: the damage comes first.
	dir := walTestCopyDir(t, base)
	seq := flip(dir, 1)
	os.Remove(filepath.Join(dir, filepath.Base(segs[3])))
	walTestExpectCorrupt(t, dir, seq)
}
