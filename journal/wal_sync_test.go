package journal

import (
	"sync"
	"testing"
)

// TestWALDirSyncOnNewSegment: every batch after which a new segment file
// exists must have fsynced the directory before returning.
func TestWALDirSyncOnNewSegment(t *testing.T) {
	r := walTestRand(t)
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{SegmentSize: 700})
	defer w.Close()
	dirSyncs, fileSyncs := 0, 0
	w.syncDir = func() error { dirSyncs++; return walFsyncDir(dir) }
	w.syncFile = func() error { fileSyncs++; return Fdatasync(w.tail.f) }
	segs := len(walTestSegments(t, dir))
	rotations := 0
	for i := 0; i < 300; i++ {
		ds, fs := dirSyncs, fileSyncs
		walTestAppend(t, w, 1+r.IntN(12), 12, nil)
		n := len(walTestSegments(t, dir))
		// One fsync per file the batch wrote to: the tail, plus every
		// segment it created, except an empty one started after its end.
		want := 1 + n - segs
		if w.tail.size == 0 {
			want--
		}
		if fileSyncs-fs != want {
			t.Fatalf("batch %d: %d file fsyncs, want %d", i, fileSyncs-fs, want)
		}
		if n > segs {
			rotations++
			if dirSyncs == ds {
				t.Fatalf("batch %d created a segment without a dir fsync", i)
			}
		}
		segs = n
	}
	if rotations < 20 {
		t.Fatalf("only %d rotations", rotations)
	}
	// The writer's view of the tail is the file on disk.
	last := walTestSegments(t, dir)
	if w.tail.size != walTestEntriesEnd(t, last[len(last)-1]) || w.tail.f.Name() != last[len(last)-1] {
		t.Fatalf("tail is %d bytes at %s, disk has %s", w.tail.size, w.tail.f.Name(), last[len(last)-1])
	}
	walTestCheck(t, w, 1, w.LastSeq())
}

// TestWALAppendAllocs: steady-state AppendBatch does not allocate per entry.
func TestWALAppendAllocs(t *testing.T) {
	w := walTestOpen(t, t.TempDir(), Options{NoSync: true, SegmentSize: 4 << 20})
	defer w.Close()
	es := make([]Entry, 64)
	payload := make([]byte, 64)
	next := uint64(1)
	appendOnce := func() {
		for i := range es {
			es[i] = Entry{Seq: next, Payload: payload}
			next++
		}
		if err := w.AppendBatch(es); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		appendOnce() // warm up the reusable buffers
	}
	if a := testing.AllocsPerRun(500, appendOnce); a > 1 {
		t.Fatalf("AppendBatch of 64 entries: %.1f allocs per call", a)
	}
	var n int
	it := func() {
		n = 0
		if err := w.Iterate(0, func(uint64, []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(5, it); a > 20 {
		t.Fatalf("Iterate over %d entries: %.0f allocs", n, a)
	}
}

// TestWALConcurrentIterate runs Iterate while batches are appended: every
// pass sees a contiguous prefix that includes everything durable at its start.
func TestWALConcurrentIterate(t *testing.T) {
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{SegmentSize: 8192, NoSync: true})
	defer w.Close()
	walTestAppend(t, w, 100, 10, nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		walTestAppend(t, w, 3000, 25, nil)
	}()
	for i := 0; i < 20; i++ {
		floor := w.LastSeq()
		next := uint64(1)
		if err := w.Iterate(0, func(seq uint64, _ []byte) error {
			if seq != next {
				t.Errorf("got %d want %d", seq, next)
			}
			next++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if next-1 < floor {
			t.Fatalf("Iterate saw up to %d, but %d was durable before it started", next-1, floor)
		}
	}
	wg.Wait()
	walTestCheck(t, w, 1, 3100)
}
