package journal

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The WAL keeps its segment list in memory (WAL.segs): it matches the
// directory through rotations, truncations and a reopen, and reading
// never lists the directory again (a file the listing refuses, put there
// after Open, changes nothing for Iterate and Read).
func TestWALSegmentListFollowsTheDir(t *testing.T) {
	dir := t.TempDir()
	r := walTestRand(t)
	w := walTestOpen(t, dir, Options{SegmentSize: 4 << 10, NoSync: true})
	same := func(when string) {
		t.Helper()
		var mem []string
		for _, s := range w.segs {
			mem = append(mem, s.path)
		}
		if disk := walTestSegments(t, dir); !slices.Equal(mem, disk) {
			t.Fatalf("%s: the WAL's list %v, the directory %v", when, mem, disk)
		}
	}
	walTestAppend(t, w, 3000, 64, r)
	if len(w.segs) < 5 {
		t.Fatalf("%d segments: the test needs rotations", len(w.segs))
	}
	same("after rotations")
	for _, seq := range []uint64{500, 500, 1800, w.LastSeq() + 1} {
		if err := w.TruncateFront(seq); err != nil {
			t.Fatal(err)
		}
		same("after TruncateFront")
		walTestAppend(t, w, 700, 64, r)
		same("after appends")
	}
	first, last := w.FirstSeq(), w.LastSeq()
	// A name the directory listing refuses (only tidwall's TruncateBack
	// writes END files): reading must not look.
	if err := os.WriteFile(filepath.Join(dir, segmentName(first + 1)[:20]+".END"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	walTestCheck(t, w, first, last)
	if err := os.Remove(filepath.Join(dir, segmentName(first + 1)[:20]+".END")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = walTestOpen(t, dir, Options{SegmentSize: 4 << 10, NoSync: true})
	defer w.Close()
	same("after reopening")
	walTestCheck(t, w, first, last)
}
