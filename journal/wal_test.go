package journal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWALRoundTrip(t *testing.T) {
	r := walTestRand(t)
	dir := filepath.Join(t.TempDir(), "a", "wal") // parents are created
	w := walTestOpen(t, dir, Options{SegmentSize: 4096})
	walTestCheck(t, w, 1, 0)
	walTestAppend(t, w, 1500, 40, r)
	walTestCheck(t, w, 1, 1500)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(walTestSegments(t, dir)); n < 5 {
		t.Fatalf("only %d segments; want several", n)
	}
	w = walTestOpen(t, dir, Options{SegmentSize: 4096})
	if w.TornTail() != nil {
		t.Fatalf("clean WAL reported torn tail: %v", w.TornTail())
	}
	walTestCheck(t, w, 1, 1500)
	walTestAppend(t, w, 700, 64, r) // continue after reopen
	walTestCheck(t, w, 1, 2200)
	// Iterate from arbitrary points, including segment boundaries.
	for _, from := range []uint64{1, 2, 777, 2199, 2200, uint64(1 + r.IntN(2200))} {
		next := from
		if err := w.Iterate(from, func(seq uint64, _ []byte) error {
			if seq != next {
				t.Fatalf("Iterate(%d): got %d want %d", from, seq, next)
			}
			next++
			return nil
		}); err != nil || next != 2201 {
			t.Fatalf("Iterate(%d): %v, ended at %d", from, err, next-1)
		}
	}
	if err := w.Iterate(2201, func(uint64, []byte) error { t.Fatal("called"); return nil }); err != nil {
		t.Fatalf("Iterate(LastSeq+1) = %v", err)
	}
	if err := w.Iterate(2202, nil); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Iterate(LastSeq+2) = %v, want ErrOutOfRange", err)
	}
	stop := errors.New("stop")
	if err := w.Iterate(5, func(uint64, []byte) error { return stop }); err != stop {
		t.Fatalf("Iterate fn error = %v, want it returned as is", err)
	}
	if _, err := w.Read(0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read(0) = %v", err)
	}
	if _, err := w.Read(2201); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read(2201) = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestWALAppendRejectsWrongSeq(t *testing.T) {
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{})
	defer w.Close()
	walTestAppend(t, w, 10, 10, nil)
	seg := walTestSegments(t, dir)[0]
	size := walTestEntriesEnd(t, seg)
	bad := [][]Entry{
		{{Seq: 12, Payload: []byte("gap")}},
		{{Seq: 10, Payload: []byte("dup")}},
		{{Seq: 11}, {Seq: 13}},
		{{Seq: 11}, {Seq: 11}},
		{{Seq: 11, Payload: make([]byte, MaxPayloadSize+1)}},
	}
	for i, es := range bad {
		err := w.AppendBatch(es)
		if err == nil || errors.Is(err, ErrFailed) {
			t.Fatalf("case %d: AppendBatch = %v, want a plain rejection", i, err)
		}
		if w.LastSeq() != 10 || walTestEntriesEnd(t, seg) != size {
			t.Fatalf("case %d: rejected batch changed the WAL", i)
		}
	}
	if err := w.AppendBatch([]Entry{{Seq: 12}}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("gap: %v, want ErrOutOfOrder", err)
	}
	if err := w.AppendBatch(nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	walTestAppend(t, w, 5, 5, nil) // still usable
	walTestCheck(t, w, 1, 15)
}

func TestWALFirstSeq(t *testing.T) {
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{FirstSeq: 1001})
	if w.FirstSeq() != 1001 || w.LastSeq() != 1000 {
		t.Fatalf("fresh WAL at 1001: First/Last = %d/%d", w.FirstSeq(), w.LastSeq())
	}
	if err := w.AppendBatch([]Entry{{Seq: 1, Payload: walTestPayload(1)}}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("seq 1 on a WAL at 1001: %v", err)
	}
	if err := w.Iterate(1000, nil); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Iterate(1000): %v, want ErrOutOfRange (gap before the WAL)", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Empty and reopened: the position survives; FirstSeq is only for new WALs.
	w = walTestOpen(t, dir, Options{FirstSeq: 5})
	walTestCheck(t, w, 1001, 1000)
	walTestAppend(t, w, 300, 30, nil)
	walTestCheck(t, w, 1001, 1300)
	w.Close()
	w = walTestOpen(t, dir, Options{})
	walTestCheck(t, w, 1001, 1300)
	w.Close()
	if ro, err := OpenReadOnly(dir); err != nil {
		t.Fatal(err)
	} else {
		walTestCheck(t, ro, 1001, 1300)
	}
}

func TestWALTruncateFront(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 2048}
	w := walTestOpen(t, dir, opts)
	walTestAppend(t, w, 500, 17, nil)
	if err := w.TruncateFront(502); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("TruncateFront past LastSeq+1: %v", err)
	}
	segs := walTestSegments(t, dir)
	holding := func(seq uint64) (int, uint64) { // the segment holding seq
		i := len(segs) - 1
		for walSegIndex(t, segs[i]) > seq {
			i--
		}
		return i, walSegIndex(t, segs[i])
	}
	k, first := holding(237)
	if k < 2 || first == 237 {
		t.Fatalf("test setup: seq 237 is in segment %d starting at %d", k, first)
	}
	for _, seq := range []uint64{237, 100, 237} { // going back is a no-op
		if err := w.TruncateFront(seq); err != nil {
			t.Fatal(err)
		}
	}
	walTestCheck(t, w, first, 500) // whole segments only: 237's segment is kept
	if got := walTestSegments(t, dir); len(got) != len(segs)-k || got[0] != segs[k] {
		t.Fatalf("segments after truncate: %v", got)
	}
	if _, err := w.Read(first - 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read(%d) = %v", first-1, err)
	}
	if err := w.Iterate(first-1, nil); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Iterate(%d) = %v", first-1, err)
	}
	walTestAppend(t, w, 100, 9, nil)
	w.Close()
	w = walTestOpen(t, dir, opts)
	walTestCheck(t, w, first, 600)
	// Everything: the (non-empty) tail segment stays.
	segs = walTestSegments(t, dir)
	_, tail := holding(600)
	if err := w.TruncateFront(601); err != nil {
		t.Fatal(err)
	}
	walTestCheck(t, w, tail, 600)
	// Make the tail segment empty (rotation right after a batch), then
	// truncating everything leaves an empty WAL positioned at LastSeq()+1.
	for s := walTestSegments(t, dir); len(walTestFrames(t, s[len(s)-1])) != 1; s = walTestSegments(t, dir) {
		walTestAppend(t, w, 1, 1, nil)
	}
	last := w.LastSeq()
	if err := w.TruncateFront(last + 1); err != nil {
		t.Fatal(err)
	}
	walTestCheck(t, w, last+1, last)
	w.Close()
	w = walTestOpen(t, dir, opts)
	walTestCheck(t, w, last+1, last)
	walTestAppend(t, w, 80, 8, nil)
	walTestCheck(t, w, last+1, last+80)
	w.Close()
}

func TestWALStickyFailure(t *testing.T) {
	for _, which := range []string{"file", "dir", "write"} {
		t.Run(which, func(t *testing.T) {
			dir := t.TempDir()
			// "write": NoSync, so the failure comes from tidwall's write path
			// (creating the next segment in a removed dir).
			w := walTestOpen(t, dir, Options{SegmentSize: 1024, NoSync: which == "write"})
			walTestAppend(t, w, 5, 5, nil)
			injected := errors.New("injected EIO")
			calls := 0
			switch which {
			case "file":
				w.syncFile = func() error { calls++; return injected }
			case "dir":
				w.syncDir = func() error { calls++; return injected }
			case "write":
				// Once the spare segment is prepared (the spare maker
				// idle, so it cannot recreate the dir's contents), remove
				// the dir: the next rotation must fail.
				walTestWaitSpare(t, w)
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			for i := 0; i < 200 && err == nil; i++ {
				next := w.LastSeq() + 1
				err = w.AppendBatch([]Entry{{Seq: next, Payload: walTestPayload(next)}})
			}
			if !errors.Is(err, ErrFailed) || (which != "write" && !errors.Is(err, injected)) {
				t.Fatalf("AppendBatch = %v, want ErrFailed wrapping the cause", err)
			}
			last := w.LastSeq()
			if which != "write" && calls != 1 {
				t.Fatalf("sync called %d times, want exactly 1 (never retried)", calls)
			}
			for i := 0; i < 3; i++ {
				if err := w.AppendBatch([]Entry{{Seq: last + 1}}); !errors.Is(err, ErrFailed) {
					t.Fatalf("later AppendBatch = %v, want ErrFailed", err)
				}
			}
			if _, err := w.Read(1); !errors.Is(err, ErrFailed) {
				t.Fatalf("Read = %v", err)
			}
			if err := w.TruncateFront(2); !errors.Is(err, ErrFailed) {
				t.Fatalf("TruncateFront = %v", err)
			}
			if err := w.Iterate(0, nil); !errors.Is(err, ErrFailed) {
				t.Fatalf("Iterate = %v", err)
			}
			if w.LastSeq() != last {
				t.Fatalf("LastSeq moved after failure")
			}
			if which != "write" && calls != 1 {
				t.Fatalf("sync retried: %d calls", calls)
			}
			if err := w.Close(); !errors.Is(err, ErrFailed) {
				t.Fatalf("Close = %v, want the sticky error", err)
			}
		})
	}
}

func TestWALClosedAndReadOnly(t *testing.T) {
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{})
	walTestAppend(t, w, 20, 20, nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	if err := w.AppendBatch([]Entry{{Seq: 21}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("AppendBatch after Close = %v", err)
	}
	if _, err := w.Read(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	walTestCheck(t, ro, 1, 20)
	if err := ro.AppendBatch([]Entry{{Seq: 21}}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("AppendBatch on read-only = %v", err)
	}
	if err := ro.TruncateFront(5); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("TruncateFront on read-only = %v", err)
	}
	if _, err := OpenReadOnly(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("OpenReadOnly of a missing dir succeeded")
	}
	empty, err := OpenReadOnly(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	walTestCheck(t, empty, 1, 0)
}
