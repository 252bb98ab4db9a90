package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// newPayload is the payload of a re-appended seq after a truncation: it
// differs from walTestPayload(seq), so a discarded entry read back shows.
func newPayload(seq uint64) []byte { return []byte(fmt.Sprintf("new-%d", seq)) }

func appendNew(t *testing.T, w *WAL, n int) {
	t.Helper()
	var es []Entry
	for i := 0; i < n; i++ {
		s := w.LastSeq() + 1 + uint64(len(es))
		es = append(es, Entry{Seq: s, Payload: newPayload(s)})
		if len(es) == 7 || i == n-1 {
			if err := w.AppendBatch(es); err != nil {
				t.Fatal(err)
			}
			es = es[:0]
		}
	}
}

// checkMixed verifies that w holds first..last: the original payloads up
// to cut, the new ones after it.
func checkMixed(t *testing.T, w *WAL, first, cut, last uint64) {
	t.Helper()
	if w.FirstSeq() != first || w.LastSeq() != last {
		t.Fatalf("FirstSeq/LastSeq = %d/%d, want %d/%d", w.FirstSeq(), w.LastSeq(), first, last)
	}
	next := first
	if err := w.Iterate(0, func(seq uint64, p []byte) error {
		want := walTestPayload(seq)
		if seq > cut {
			want = newPayload(seq)
		}
		if seq != next || !bytes.Equal(p, want) {
			return fmt.Errorf("seq %d (want %d): payload %q, want %q", seq, next, p, want)
		}
		next++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if next != last+1 {
		t.Fatalf("Iterate ended at %d, want %d", next-1, last)
	}
}

func sameSegs(t *testing.T, w *WAL, dir string) {
	t.Helper()
	var mem []string
	for _, s := range w.segs {
		mem = append(mem, s.path)
	}
	if disk := walTestSegments(t, dir); !slices.Equal(mem, disk) {
		t.Fatalf("the WAL's list %v, the directory %v", mem, disk)
	}
}

// TruncateBack to seqs in the middle of a segment, at a segment's first
// entry, at the end of one, at FirstSeq()-1 (everything): the WAL then holds
// exactly the prefix, its segment list matches the directory, appends go
// on from seq+1, and a reopen sees the same.
func TestWALTruncateBack(t *testing.T) {
	dir := t.TempDir()
	r := walTestRand(t)
	opts := Options{SegmentSize: 4 << 10}
	w := walTestOpen(t, dir, opts)
	defer func() { w.Close() }()
	walTestAppend(t, w, 3000, 64, r)
	if len(w.segs) < 8 {
		t.Fatalf("%d segments: the test needs several", len(w.segs))
	}
	if err := w.TruncateFront(300); err != nil {
		t.Fatal(err)
	}
	first := w.FirstSeq()
	// The segment starts and ends, and random seqs inside.
	var cuts []uint64
	for i := len(w.segs) - 1; i >= 1; i -= 3 {
		cuts = append(cuts, w.segs[i].index, w.segs[i].index-1)
	}
	slices.Sort(cuts)
	slices.Reverse(cuts)
	for i, cut := range append(cuts, first+uint64(r.IntN(50))) {
		last := w.LastSeq()
		if cut >= last {
			continue
		}
		if err := w.TruncateBack(cut); err != nil {
			t.Fatalf("TruncateBack(%d): %v", cut, err)
		}
		if w.LastSeq() != cut {
			t.Fatalf("LastSeq %d after TruncateBack(%d)", w.LastSeq(), cut)
		}
		if _, err := w.Read(cut + 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Read(%d) after TruncateBack(%d): %v", cut+1, cut, err)
		}
		sameSegs(t, w, dir)
		walTestCheck(t, w, first, cut)
		if i%2 == 0 { // appends go on from cut+1 (on the open WAL)
			appendNew(t, w, 40)
			checkMixed(t, w, first, cut, cut+40)
			if err := w.TruncateBack(cut); err != nil {
				t.Fatal(err)
			}
		}
	}
	cut := w.LastSeq()
	appendNew(t, w, 500)
	sameSegs(t, w, dir)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = walTestOpen(t, dir, opts)
	sameSegs(t, w, dir)
	checkMixed(t, w, first, cut, cut+500)

	// Everything: seq = FirstSeq()-1. Then below it: refused, nothing changed.
	if err := w.TruncateBack(first - 1); err != nil {
		t.Fatal(err)
	}
	if w.FirstSeq() != first || w.LastSeq() != first-1 {
		t.Fatalf("after dropping everything: %d..%d", w.FirstSeq(), w.LastSeq())
	}
	appendNew(t, w, 10)
	if err := w.TruncateBack(first - 2); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("TruncateBack below FirstSeq()-1: %v, want ErrOutOfRange", err)
	}
	checkMixed(t, w, first, first-1, first+9)
	// At or after LastSeq: nothing to do.
	if err := w.TruncateBack(first + 9); err != nil {
		t.Fatal(err)
	}
	if err := w.TruncateBack(first + 100); err != nil {
		t.Fatal(err)
	}
	checkMixed(t, w, first, first-1, first+9)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = walTestOpen(t, dir, opts)
	checkMixed(t, w, first, first-1, first+9)

	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.TruncateBack(first); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only TruncateBack: %v", err)
	}
}

// Iterate running beside TruncateBack sees a consistent WAL: either the
// entries before or after the truncation, never a file vanishing under it.
func TestWALTruncateBackBesideReaders(t *testing.T) {
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{SegmentSize: 4 << 10, NoSync: true})
	defer w.Close()
	walTestAppend(t, w, 4000, 64, nil)
	done := make(chan error)
	go func() {
		for i := 0; i < 30; i++ {
			var n uint64
			if err := w.Iterate(0, func(seq uint64, p []byte) error {
				n++
				if !bytes.Equal(p, walTestPayload(seq)) && !bytes.Equal(p, newPayload(seq)) {
					return fmt.Errorf("seq %d: payload %q", seq, p)
				}
				return nil
			}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for cut := 3900; cut > 100; cut -= 400 {
		if err := w.TruncateBack(uint64(cut)); err != nil {
			t.Fatal(err)
		}
		appendNew(t, w, 200)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The crash points of TruncateBack: the WAL directory after every prefix
// of its durable steps (a crash between two of them) opens, holds a prefix
// of the WAL that ends at or after seq, every entry intact; after all the
// steps it ends exactly at seq. Also the crash right after the cut, before
// the writer preallocated again, and a cut that is only half done (the
// truncated range reads as zeros: its blocks were freed, the size not yet
// written).
func TestWALTruncateBackCrashPoints(t *testing.T) {
	src := t.TempDir()
	r := walTestRand(t)
	opts := Options{SegmentSize: 4 << 10}
	w := walTestOpen(t, src, opts)
	walTestAppend(t, w, 2500, 64, r)
	last := w.LastSeq()
	segs := len(w.segs)
	for _, cut := range []uint64{last - 1, w.segs[segs-1].index - 1, w.segs[segs-3].index, 700 + uint64(r.IntN(500)), 0} {
		w.mu.Lock()
		_, steps, err := w.truncateBackPlan(cut)
		w.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		// The live WAL has its tail open with zeros preallocated: a copy of
		// the directory is what a crash leaves.
		for i := 0; i <= len(steps); i++ {
			dst := walTestCopyDir(t, src)
			for _, st := range steps[:i] {
				if st.remove != "" {
					st.remove = filepath.Join(dst, filepath.Base(st.remove))
				} else {
					st.cut = filepath.Join(dst, filepath.Base(st.cut))
				}
				if err := st.apply(dst, false); err != nil {
					t.Fatal(err)
				}
			}
			cw, err := Open(dst, Options{SegmentSize: opts.SegmentSize, Logger: walQuietLogger()})
			if err != nil {
				t.Fatalf("cut %d, crash after step %d of %d: Open: %v", cut, i, len(steps), err)
			}
			end := cw.LastSeq()
			if end < cut || end > last || (i == len(steps) && end != cut) {
				cw.Close()
				t.Fatalf("cut %d, crash after step %d of %d: the WAL ends at %d (was %d)", cut, i, len(steps), end, last)
			}
			walTestCheck(t, cw, 1, end)
			// A crash midway is finished by truncating again.
			if err := cw.TruncateBack(cut); err != nil {
				t.Fatal(err)
			}
			appendNew(t, cw, 30)
			checkMixed(t, cw, 1, cut, cut+30)
			if err := cw.Close(); err != nil {
				t.Fatal(err)
			}
		}
		// A cut half done: the bytes after the cut point are zeros (freed
		// blocks), the file size is the old one.
		st := steps[len(steps)-1]
		dst := walTestCopyDir(t, src)
		for _, s := range steps[:len(steps)-1] {
			if err := os.Remove(filepath.Join(dst, filepath.Base(s.remove))); err != nil {
				t.Fatal(err)
			}
		}
		p := filepath.Join(dst, filepath.Base(st.cut))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		clear(b[st.size:])
		if err := os.WriteFile(p, b, 0o640); err != nil {
			t.Fatal(err)
		}
		cw, err := Open(dst, Options{SegmentSize: opts.SegmentSize, Logger: walQuietLogger()})
		if err != nil {
			t.Fatalf("cut %d half done: %v", cut, err)
		}
		if cw.LastSeq() != cut {
			t.Fatalf("cut %d half done: the WAL ends at %d", cut, cw.LastSeq())
		}
		walTestCheck(t, cw, 1, cut)
		cw.Close()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// DiscardAfter removes the snapshots above seq before cutting the WAL, and
// refuses (changing nothing) when no base would remain.
func TestDiscardAfter(t *testing.T) {
	dir := t.TempDir()
	snaps, err := OpenSnapshotStore(filepath.Join(dir, SnapshotDir), walQuietLogger())
	if err != nil {
		t.Fatal(err)
	}
	w := walTestOpen(t, filepath.Join(dir, WALDir), Options{SegmentSize: 4 << 10})
	walTestAppend(t, w, 2000, 64, nil)
	for _, s := range []uint64{500, 1000, 1500} {
		if err := snaps.Write(s, []byte(fmt.Sprintf("state at %d", s))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.TruncateFront(1001); err != nil {
		t.Fatal(err)
	}
	first := w.FirstSeq() // <= 1001: the segment holding 1001 is kept
	if first <= 500 || first > 1001 {
		t.Fatalf("FirstSeq %d: the test wants 500 < first <= 1001", first)
	}
	// Below the snapshot at 1000: no snapshot in [first-1, seq] would remain.
	if err := DiscardAfter(w, snaps, 999, walQuietLogger()); !errors.Is(err, ErrNoBase) {
		t.Fatalf("DiscardAfter(999): %v, want ErrNoBase", err)
	}
	if l, _ := snaps.List(); len(l) != 3 || w.LastSeq() != 2000 {
		t.Fatalf("a refused discard changed things: %d snapshots, last seq %d", len(l), w.LastSeq())
	}
	// A damaged snapshot is no base.
	if err := os.WriteFile(snaps.path(1000), []byte("garbage"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := DiscardAfter(w, snaps, 1200, walQuietLogger()); !errors.Is(err, ErrNoBase) {
		t.Fatalf("DiscardAfter(1200) with the snapshot at 1000 damaged: %v, want ErrNoBase", err)
	}
	if err := snaps.Write(1000, []byte("state at 1000")); err != nil {
		t.Fatal(err)
	}
	if err := DiscardAfter(w, snaps, 1200, walQuietLogger()); err != nil {
		t.Fatal(err)
	}
	l, err := snaps.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[1].Seq != 1000 || w.LastSeq() != 1200 {
		t.Fatalf("after DiscardAfter(1200): snapshots %v, last seq %d", l, w.LastSeq())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// On a closed data dir, through Open (MinLastSeq would refuse a WAL
	// shorter than its newest snapshot: it is accepted).
	if err := DiscardDirAfter(dir, 1100, Options{SegmentSize: 4 << 10, Logger: walQuietLogger()}); err != nil {
		t.Fatal(err)
	}
	w = walTestOpen(t, filepath.Join(dir, WALDir), Options{SegmentSize: 4 << 10, MinLastSeq: 1000})
	defer w.Close()
	walTestCheck(t, w, first, 1100)
	if err := DiscardAfter(w, snaps, first-2, walQuietLogger()); !errors.Is(err, ErrOutOfRange) ||
		!strings.Contains(err.Error(), "starts at") {
		t.Fatalf("DiscardAfter below the WAL: %v", err)
	}
}
