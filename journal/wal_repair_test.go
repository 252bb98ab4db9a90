package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func walSegIndex(t testing.TB, path string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(filepath.Base(path)[:20], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// walTestBuild writes a WAL of n entries with small segments and closes it.
func walTestBuild(t testing.TB, n int, segSize int) (dir string, segs []string) {
	t.Helper()
	dir = t.TempDir()
	w := walTestOpen(t, dir, Options{SegmentSize: segSize, NoSync: true})
	walTestAppend(t, w, n, 7, nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, walTestSegments(t, dir)
}

func TestWALTornTail(t *testing.T) {
	r := walTestRand(t)
	base, segs := walTestBuild(t, 120, 1024)
	lastSeg := segs[len(segs)-1]
	frames := walTestFrames(t, lastSeg)
	if len(frames) < 3 {
		t.Fatalf("last segment holds %d entries; want >= 2", len(frames)-1)
	}
	size := frames[len(frames)-1]
	var cuts []int64
	for off := frames[len(frames)-2]; off < size; off++ { // every byte of the last entry
		cuts = append(cuts, off)
	}
	for i := 0; i < 15; i++ {
		cuts = append(cuts, r.Int64N(size))
	}
	for _, cut := range cuts {
		dir := walTestCopyDir(t, base)
		seg := filepath.Join(dir, filepath.Base(lastSeg))
		if err := os.Truncate(seg, cut); err != nil {
			t.Fatal(err)
		}
		whole, boundary := 0, false
		for i := 1; i < len(frames); i++ {
			if frames[i] <= cut {
				whole = i
			}
			boundary = boundary || frames[i-1] == cut
		}
		wantLast := walSegIndex(t, lastSeg) + uint64(whole) - 1
		logs := &walLogBuf{}
		w, err := Open(dir, Options{SegmentSize: 1024, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatalf("cut %d: Open: %v", cut, err)
		}
		if w.LastSeq() != wantLast {
			t.Fatalf("cut %d: LastSeq %d, want %d", cut, w.LastSeq(), wantLast)
		}
		if tt := w.TornTail(); boundary != (tt == nil) || (tt != nil && !errors.Is(tt, ErrTornTail)) {
			t.Fatalf("cut %d (boundary %v): TornTail = %v", cut, boundary, tt)
		} else if tt != nil {
			if want := fmt.Sprintf("seq %d", wantLast+1); !strings.Contains(tt.Error(), want) ||
				!strings.Contains(logs.String(), "dropped_from_seq="+strconv.FormatUint(wantLast+1, 10)) {
				t.Fatalf("cut %d: torn tail %q / log %q should name %s", cut, tt, logs.String(), want)
			}
		}
		if got := walTestEntriesEnd(t, seg); got != frames[whole] {
			t.Fatalf("cut %d: segment is %d bytes after repair, want %d", cut, got, frames[whole])
		}
		walTestAppend(t, w, 3, 3, nil)
		w.Close()
		w = walTestOpen(t, dir, Options{SegmentSize: 1024})
		if w.TornTail() != nil {
			t.Fatalf("cut %d: second open still torn: %v", cut, w.TornTail())
		}
		walTestCheck(t, w, 1, wantLast+3)
		w.Close()
	}
}

func TestWALGarbageTail(t *testing.T) {
	r := walTestRand(t)
	base, segs := walTestBuild(t, 60, 1<<20)
	for i := 0; i < 12; i++ {
		dir := walTestCopyDir(t, base)
		seg := filepath.Join(dir, filepath.Base(segs[len(segs)-1]))
		junk := make([]byte, 1+r.IntN(300))
		if i%3 != 0 { // every third: zeros, as a crash that extended the file leaves
			for j := range junk {
				junk[j] = byte(r.Uint32())
			}
		}
		size := walTestFileSize(t, seg)
		f, _ := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		f.Write(junk)
		f.Close()
		// Zeros after the last entry are preallocated space (or a crash
		// that extended the file before its data reached the disk): the
		// clean end of the entries, not a torn tail.
		torn := !allZeroBytes(junk)
		ro, err := OpenReadOnly(dir)
		if err != nil || errors.Is(ro.TornTail(), ErrTornTail) != torn || ro.LastSeq() != 60 {
			t.Fatalf("OpenReadOnly (junk all zero %v): %v, torn %v, last %d", !torn, err, ro.TornTail(), ro.LastSeq())
		}
		walTestCheck(t, ro, 1, 60)
		if walTestFileSize(t, seg) != size+int64(len(junk)) {
			t.Fatal("OpenReadOnly modified the segment")
		}
		w := walTestOpen(t, dir, Options{})
		if w.LastSeq() != 60 || (w.TornTail() != nil) != torn || walTestEntriesEnd(t, seg) != size {
			t.Fatalf("garbage %d bytes: last %d torn %v entries end at %d", len(junk), w.LastSeq(), w.TornTail(), walTestEntriesEnd(t, seg))
		}
		walTestAppend(t, w, 5, 5, nil)
		walTestCheck(t, w, 1, 65)
		w.Close()
	}
}

// walTestExpectCorrupt opens dir (read-write and read-only) and expects a
// corruption error naming seq, with nothing on disk changed.
func walTestExpectCorrupt(t *testing.T, dir string, seq uint64) {
	t.Helper()
	before := map[string]int64{}
	for _, s := range walTestSegments(t, dir) {
		before[s] = walTestFileSize(t, s)
	}
	_, err := Open(dir, Options{SegmentSize: 1024, Logger: walQuietLogger()})
	_, roErr := OpenReadOnly(dir)
	for _, e := range []error{err, roErr} {
		var ce *CorruptError
		if !errors.Is(e, ErrCorrupt) || errors.Is(e, ErrTornTail) || !errors.As(e, &ce) || ce.Seq != seq {
			t.Fatalf("open = %v, want a corruption error at seq %d", e, seq)
		}
		if want := fmt.Sprintf("journal: corrupt entry at seq %d in segment ", seq); !strings.HasPrefix(e.Error(), want) {
			t.Fatalf("message %q lacks %q", e, want)
		}
	}
	for s, n := range before {
		if walTestFileSize(t, s) != n {
			t.Fatalf("failed open modified %s", s)
		}
	}
}

func TestWALCorruptMiddle(t *testing.T) {
	r := walTestRand(t)
	base, segs := walTestBuild(t, 200, 1024)
	one, oneSegs := walTestBuild(t, 200, 1<<20) // a single segment holding many batches
	flip := func(dir, seg string, entry int) uint64 {
		path := filepath.Join(dir, filepath.Base(seg))
		frames := walTestFrames(t, path)
		b, _ := os.ReadFile(path)
		pos := frames[entry] + r.Int64N(frames[entry+1]-frames[entry])
		b[pos] ^= 1 << r.IntN(8)
		os.WriteFile(path, b, 0o640)
		return walSegIndex(t, seg) + uint64(entry)
	}
	for i := 0; i < 10; i++ {
		// A middle entry of the last segment, followed by a whole later
		// batch (so it was fsynced).
		dir := walTestCopyDir(t, one)
		last := oneSegs[len(oneSegs)-1]
		ends := walTestBatchEnds(t, last)
		cand := -1
		for e := len(ends) - 1; e >= 0; e-- {
			if ends[e] && e+1 < len(ends) {
				cand = e // entries 0..e have a later batch after them
				break
			}
		}
		if cand < 0 {
			t.Fatal("the last segment holds no batch end followed by another batch")
		}
		walTestExpectCorrupt(t, dir, flip(dir, last, r.IntN(cand+1)))
		// Any entry (even the last one) of an earlier segment.
		dir = walTestCopyDir(t, base)
		k := r.IntN(len(segs) - 1)
		n := len(walTestFrames(t, segs[k])) - 1
		walTestExpectCorrupt(t, dir, flip(dir, segs[k], r.IntN(n)))
	}
	// A torn (short) earlier segment is corruption, not a torn tail.
	dir := walTestCopyDir(t, base)
	first := filepath.Join(dir, filepath.Base(segs[0]))
	frames := walTestFrames(t, first)
	os.Truncate(first, frames[len(frames)-1]-3)
	walTestExpectCorrupt(t, dir, walSegIndex(t, segs[1])-1)
	// A missing middle segment.
	dir = walTestCopyDir(t, base)
	os.Remove(filepath.Join(dir, filepath.Base(segs[1])))
	walTestExpectCorrupt(t, dir, walSegIndex(t, segs[1]))
	// A whole, checksummed entry with the wrong seq at the tail.
	dir = walTestCopyDir(t, base)
	f, _ := os.OpenFile(filepath.Join(dir, filepath.Base(segs[len(segs)-1])), os.O_WRONLY|os.O_APPEND, 0)
	env := AppendEnvelope(nil, 205, []byte("x"))
	f.Write(append([]byte{byte(len(env))}, env...))
	f.Close()
	walTestExpectCorrupt(t, dir, 201)
}

// TestWALTornLastBatchOutOfOrder: after a power loss the pages of the last,
// never-fsynced batch may reach the disk in any order, so an unwritten
// (zero) page can be followed by whole entries of the same batch. That is a
// torn tail (nothing in it was acknowledged): Open truncates at the first
// damaged entry. The same batch with flipped bits instead (bit rot: the
// batch may have been fsynced and acknowledged) is refused, and so is
// damage followed by a later batch.
func TestWALTornLastBatchOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{SegmentSize: 1 << 20, NoSync: true})
	walTestAppend(t, w, 50, 7, nil)
	walTestAppend(t, w, 400, 400, nil) // the last batch: seqs 51..450, several pages
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seg := walTestSegments(t, dir)[0]
	frames := walTestFrames(t, seg)
	ends := walTestBatchEnds(t, seg)
	if !ends[49] || !ends[449] || ends[200] {
		t.Fatal("batch-end marks misplaced")
	}
	if frames[len(frames)-1] < 4*lostPageSize {
		t.Fatalf("segment too small (%d bytes) for the test", frames[len(frames)-1])
	}
	entryAt := func(off int64) int { // index of the entry holding byte off
		i := 0
		for i+1 < len(frames) && frames[i+1] <= off {
			i++
		}
		return i
	}
	// Zero the second page that lies wholly inside the last batch.
	page := (frames[50] + lostPageSize - 1) / lostPageSize * lostPageSize
	page += lostPageSize
	first := entryAt(page) // the first entry the lost page damages
	d := walTestCopyDir(t, dir)
	path := filepath.Join(d, filepath.Base(seg))
	b, _ := os.ReadFile(path)
	for j := page; j < page+lostPageSize; j++ {
		b[j] = 0
	}
	os.WriteFile(path, b, 0o640)
	w2, err := Open(d, Options{SegmentSize: 1 << 20, NoSync: true, Logger: walQuietLogger()})
	if err != nil {
		t.Fatalf("an unwritten page in the unsynced last batch: open = %v, want a repaired torn tail", err)
	}
	if w2.LastSeq() != uint64(first) {
		t.Fatalf("after repair last seq %d, want %d", w2.LastSeq(), first)
	}
	w2.Close()
	// The batch's first page, shared with the end of the previous (synced)
	// batch, was lost while later pages reached the disk: it reads back as
	// the synced bytes and then zeros to the page's end. Also a torn tail.
	if frames[50]%lostPageSize == 0 {
		t.Fatal("test setup: the last batch starts on a page boundary")
	}
	d = walTestCopyDir(t, dir)
	path = filepath.Join(d, filepath.Base(seg))
	b, _ = os.ReadFile(path)
	pageEnd := (frames[50]/lostPageSize + 1) * lostPageSize
	for j := frames[50]; j < pageEnd; j++ {
		b[j] = 0
	}
	os.WriteFile(path, b, 0o640)
	w2, err = Open(d, Options{SegmentSize: 1 << 20, NoSync: true, Logger: walQuietLogger()})
	if err != nil {
		t.Fatalf("the batch's first (partial) page lost: open = %v, want a repaired torn tail", err)
	}
	if w2.LastSeq() != 50 {
		t.Fatalf("after repair last seq %d, want 50", w2.LastSeq())
	}
	w2.Close()
	// Zeros from the batch's start that stop short of the page's end: that
	// page did reach the disk (with zeros inside it), so this is damage.
	d = walTestCopyDir(t, dir)
	path = filepath.Join(d, filepath.Base(seg))
	b, _ = os.ReadFile(path)
	for j := frames[50]; j < pageEnd-1; j++ {
		b[j] = 0
	}
	b[pageEnd-1] = 0xFF
	os.WriteFile(path, b, 0o640)
	walTestExpectCorrupt(t, d, 51)
	// Flipped bits in the last batch with whole entries after: refused.
	d = walTestCopyDir(t, dir)
	path = filepath.Join(d, filepath.Base(seg))
	b, _ = os.ReadFile(path)
	b[frames[300]+10] ^= 0xFF
	os.WriteFile(path, b, 0o640)
	walTestExpectCorrupt(t, d, 301)
	// A zero page in the batch before the last one: a later batch follows, refused.
	d = walTestCopyDir(t, dir)
	path = filepath.Join(d, filepath.Base(seg))
	b, _ = os.ReadFile(path)
	for j := frames[45]; j < frames[46]; j++ {
		b[j] = 0
	}
	os.WriteFile(path, b, 0o640)
	walTestExpectCorrupt(t, d, 46)
}

// walTestBatchEnds reports, per entry of a segment file, whether its
// envelope carries the batch-end mark.
func walTestBatchEnds(t testing.TB, path string) []bool {
	t.Helper()
	frames := walTestFrames(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []bool
	for i := 0; i+1 < len(frames); i++ {
		_, k := binary.Uvarint(b[frames[i]:])
		out = append(out, EnvelopeEndsBatch(b[frames[i]+int64(k):frames[i+1]]))
	}
	return out
}

func TestWALIterateAndReadDetectCorruption(t *testing.T) {
	dir, segs := walTestBuild(t, 200, 1024)
	w := walTestOpen(t, dir, Options{SegmentSize: 1024})
	defer w.Close()
	frames := walTestFrames(t, segs[1])
	b, _ := os.ReadFile(segs[1])
	b[frames[2]+5] ^= 0x40 // inside the envelope header of the third entry
	os.WriteFile(segs[1], b, 0o640)
	seq := walSegIndex(t, segs[1]) + 2
	err := w.Iterate(0, func(uint64, []byte) error { return nil })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Seq != seq || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Iterate = %v, want corruption at seq %d", err, seq)
	}
	if _, err := w.Read(seq); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read(%d) = %v, want ErrCorrupt", seq, err)
	}
}

func TestWALRepairEmptiesSegment(t *testing.T) {
	// The only segment (of a WAL that starts at 50) loses its only entry.
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{FirstSeq: 50})
	walTestAppend(t, w, 1, 1, nil)
	w.Close()
	seg := walTestSegments(t, dir)[0]
	os.Truncate(seg, 5)
	w = walTestOpen(t, dir, Options{})
	if w.TornTail() == nil || walTestEntriesEnd(t, seg) != 0 {
		t.Fatalf("torn %v, entries end at %d", w.TornTail(), walTestEntriesEnd(t, seg))
	}
	walTestCheck(t, w, 50, 49)
	walTestAppend(t, w, 4, 4, nil)
	w.Close()
	w = walTestOpen(t, dir, Options{})
	walTestCheck(t, w, 50, 53)
	w.Close()

	// A later segment loses its only entry.
	dir = t.TempDir()
	w = walTestOpen(t, dir, Options{SegmentSize: 300})
	for len(walTestSegments(t, dir)) < 3 || len(walTestFrames(t, walTestSegments(t, dir)[len(walTestSegments(t, dir))-1])) != 2 {
		walTestAppend(t, w, 1, 1, nil)
	}
	last := w.LastSeq()
	w.Close()
	segs := walTestSegments(t, dir)
	os.Truncate(segs[len(segs)-1], 1)
	w = walTestOpen(t, dir, Options{SegmentSize: 300})
	walTestCheck(t, w, 1, last-1)
	walTestAppend(t, w, 30, 3, nil)
	w.Close()
	w = walTestOpen(t, dir, Options{SegmentSize: 300})
	walTestCheck(t, w, 1, last+29)
	w.Close()
}

// TestWALInterruptedTruncateFront leaves the files of a tidwall
// TruncateFront that crashed after writing its START file.
func TestWALInterruptedTruncateFront(t *testing.T) {
	dir, segs := walTestBuild(t, 300, 1024)
	k := len(segs) / 2
	x := walSegIndex(t, segs[k]) + 2
	frames := walTestFrames(t, segs[k])
	b, _ := os.ReadFile(segs[k])
	start := filepath.Join(dir, segmentName(x)+".START")
	os.WriteFile(start, b[frames[2]:], 0o640)
	os.WriteFile(start+".TEMP", []byte("junk"), 0o640)

	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	walTestCheck(t, ro, x, 300)
	if _, err := os.Stat(segs[0]); err != nil {
		t.Fatal("OpenReadOnly removed files")
	}
	w := walTestOpen(t, dir, Options{SegmentSize: 1024})
	walTestCheck(t, w, x, 300)
	w.Close()
	for _, p := range append(segs[:k+1:k+1], start, start+".TEMP") {
		if p == filepath.Join(dir, segmentName(x)) {
			continue
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still exists after recovery", p)
		}
	}
}
