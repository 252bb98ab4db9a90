package journal

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// walTestWaitSpare waits until w's next segment is prepared and ready.
func walTestWaitSpare(t *testing.T, w *WAL) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(w.tail.spares.ready) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the spare segment was not prepared within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWALPreallocatesSegments: the tail is written in place over zeros
// that fill it to the segment size, and a rotation takes the prepared spare
// (full size before any entry is written to it); sealed segments and a
// cleanly closed tail hold no zeros and read back with tidwall.
func TestWALPreallocatesSegments(t *testing.T) {
	const segSize = 8 << 10
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{SegmentSize: segSize})
	tail := func() string { s := walTestSegments(t, dir); return s[len(s)-1] }
	if got := walTestFileSize(t, tail()); got != segSize {
		t.Fatalf("fresh tail holds %d bytes, want %d preallocated", got, segSize)
	}
	walTestAppend(t, w, 20, 5, nil)
	if got, end := walTestFileSize(t, tail()), walTestEntriesEnd(t, tail()); got != segSize || end == 0 || end >= segSize {
		t.Fatalf("tail is %d bytes with entries up to %d, want %d with zeros after the entries", got, end, segSize)
	}
	for rot := 0; rot < 3; rot++ {
		walTestWaitSpare(t, w)
		before := len(walTestSegments(t, dir))
		for len(walTestSegments(t, dir)) == before {
			walTestAppend(t, w, 1, 1, nil)
		}
		segs := walTestSegments(t, dir)
		sealed := segs[len(segs)-2]
		if walTestFileSize(t, sealed) != walTestEntriesEnd(t, sealed) {
			t.Fatalf("sealed segment %s holds zeros after its entries", sealed)
		}
		// The new tail was the spare: full size already (at most one
		// entry of the batch that crossed the limit is in it).
		if got := walTestFileSize(t, tail()); got != segSize {
			t.Fatalf("rotation %d: new tail holds %d bytes, want the %d-byte spare", rot, got, segSize)
		}
	}
	walTestCheck(t, w, 1, w.LastSeq())
	last := w.LastSeq()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, spareName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Close left the spare behind: %v", err)
	}
	if walTestFileSize(t, tail()) != walTestEntriesEnd(t, tail()) {
		t.Fatal("a cleanly closed tail still holds preallocated zeros")
	}
	walTestTidwallRead(t, dir, 1, last)
}

// TestWALCrashWithPreallocatedTail: a process that dies with its tail
// preallocated (and a spare prepared) leaves a WAL that opens with every
// entry, no torn tail and no warning; it continues, and tidwall reads it.
func TestWALCrashWithPreallocatedTail(t *testing.T) {
	const segSize = 8 << 10
	live := t.TempDir()
	w := walTestOpen(t, live, Options{SegmentSize: segSize})
	defer w.Close()
	walTestAppend(t, w, 150, 9, walTestRand(t))
	walTestWaitSpare(t, w)
	last := w.LastSeq()
	dir := walTestCopyDir(t, live) // what a kill -9 leaves on disk now
	if _, err := os.Stat(filepath.Join(dir, spareName)); err != nil {
		t.Fatalf("the copy holds no spare: %v", err)
	}
	segs := walTestSegments(t, dir)
	if tail := segs[len(segs)-1]; walTestFileSize(t, tail) <= walTestEntriesEnd(t, tail) {
		t.Fatal("test setup: the copied tail holds no preallocated zeros")
	}
	logs := &walLogBuf{}
	w2, err := Open(dir, Options{SegmentSize: segSize, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if w2.TornTail() != nil || w2.LastSeq() != last || strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("torn %v, last %d (want %d), log %q", w2.TornTail(), w2.LastSeq(), last, logs.String())
	}
	walTestAppend(t, w2, 40, 7, nil)
	walTestCheck(t, w2, 1, last+40)
	w2.Close()
	walTestTidwallRead(t, dir, 1, last+40)

	ro, err := OpenReadOnly(walTestCopyDir(t, live))
	if err != nil || ro.TornTail() != nil || ro.LastSeq() != last {
		t.Fatalf("OpenReadOnly of the live WAL: %v, torn %v, last %d (want %d)", err, ro.TornTail(), ro.LastSeq(), last)
	}
	walTestCheck(t, ro, 1, last)
}

// TestWALZerosInSealedSegmentAreCorruption: only the last segment may hold
// zeros after its entries (the writer cuts a segment to its entries before
// it creates the next one), so zeros in an earlier one are refused.
func TestWALZerosInSealedSegmentAreCorruption(t *testing.T) {
	dir, segs := walTestBuild(t, 200, 1024)
	if len(segs) < 3 {
		t.Fatalf("test setup: %d segments", len(segs))
	}
	f, err := os.OpenFile(segs[1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 4096))
	f.Close()
	walTestExpectCorrupt(t, dir, walSegIndex(t, segs[2]))
}

// TestWALZerosThenDataIsNotPadding: a zero byte where an entry should
// start, with data after it, is damage (not preallocated space): Open
// reports it like any other damaged entry rather than dropping what follows.
func TestWALZerosThenDataIsNotPadding(t *testing.T) {
	dir, segs := walTestBuild(t, 60, 1<<20)
	seg := segs[len(segs)-1]
	frames := walTestFrames(t, seg)
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// Zero the length prefix of entry 30: entries 31..60 (later batches)
	// follow, so this is corruption inside acknowledged data.
	b[frames[29]] = 0
	os.WriteFile(seg, b, 0o640)
	walTestExpectCorrupt(t, dir, walSegIndex(t, seg)+29)
}

// TestWALLeftoverSpareIsRemoved: a spare left by a crash is never taken for
// a segment, and Open removes it before preparing its own.
func TestWALLeftoverSpareIsRemoved(t *testing.T) {
	dir, _ := walTestBuild(t, 30, 1024)
	junk := []byte("not zeros: a spare some crash left half-written")
	if err := os.WriteFile(filepath.Join(dir, spareName), junk, 0o640); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(dir)
	if err != nil || ro.LastSeq() != 30 {
		t.Fatalf("OpenReadOnly with a leftover spare: %v, last %d", err, ro.LastSeq())
	}
	w := walTestOpen(t, dir, Options{SegmentSize: 1024})
	walTestWaitSpare(t, w)
	b, err := os.ReadFile(filepath.Join(dir, spareName))
	if err != nil || !allZeroBytes(b) {
		t.Fatalf("the spare after Open is not the new zero-filled one (%v)", err)
	}
	walTestAppend(t, w, 100, 9, nil)
	walTestCheck(t, w, 1, 130)
	w.Close()
}
