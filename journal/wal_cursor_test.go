package journal

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// A cursor carried across IterateCursor calls over consecutive seqs (with
// appends in between, across segment rotations, with calls that stop early
// through fn's error) visits every entry exactly once, in order, as Iterate
// does; a cursor that is not at the seq asked for is ignored.
func TestWALCursorFollowsAppends(t *testing.T) {
	w := walTestOpen(t, t.TempDir(), Options{SegmentSize: 4096})
	defer w.Close()
	r := walTestRand(t)
	var cur WALCursor
	errStop := errors.New("stop")
	next := uint64(1)
	for round := 0; round < 300; round++ {
		walTestAppend(t, w, 1+r.IntN(40), 16, r)
		limit := next + uint64(r.IntN(60)) // fn refuses entries past it
		err := w.IterateCursor(&cur, next, func(seq uint64, p []byte) error {
			if seq > limit {
				return errStop
			}
			if seq != next || !bytes.Equal(p, walTestPayload(seq)) {
				t.Fatalf("round %d: got seq %d (payload ok %v), want %d", round, seq,
					bytes.Equal(p, walTestPayload(seq)), next)
			}
			next++
			return nil
		})
		if err != nil && err != errStop {
			t.Fatalf("round %d: %v", round, err)
		}
		if cur.next != next {
			t.Fatalf("round %d: cursor at seq %d, want %d", round, cur.next, next)
		}
	}
	if len(walTestSegments(t, w.dir)) < 3 {
		t.Fatal("the test never rotated a segment")
	}
	// A cursor elsewhere is ignored.
	stale := cur
	seen := 0
	if err := w.IterateCursor(&stale, 5, func(seq uint64, p []byte) error {
		if seq != uint64(5+seen) {
			t.Fatalf("stale cursor: seq %d, want %d", seq, 5+seen)
		}
		seen++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := int(w.LastSeq()) - 4; seen != want {
		t.Fatalf("stale cursor: %d entries, want %d", seen, want)
	}
}

// The cursor resumes at its byte offset: the frames before it are not read
// again. Damage to an earlier frame of the same segment, which a scan from
// the segment's start must trip over, goes unnoticed by the cursor's next
// call, and is still found by a plain Iterate.
func TestWALCursorSkipsReadFrames(t *testing.T) {
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{SegmentSize: 1 << 20})
	defer w.Close()
	walTestAppend(t, w, 50, 10, nil)
	var cur WALCursor
	n := 0
	if err := w.IterateCursor(&cur, 1, func(uint64, []byte) error { n++; return nil }); err != nil || n != 50 {
		t.Fatalf("first call: %d entries, %v", n, err)
	}
	walTestAppend(t, w, 10, 10, nil)
	segs := walTestSegments(t, dir)
	frames := walTestFrames(t, segs[len(segs)-1])
	f, err := os.OpenFile(segs[len(segs)-1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The length prefix of entry 3 now claims more bytes than the file has.
	if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, frames[2]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var got []uint64
	if err := w.IterateCursor(&cur, 51, func(seq uint64, _ []byte) error { got = append(got, seq); return nil }); err != nil {
		t.Fatalf("cursor call after damage before it: %v", err)
	}
	if len(got) != 10 || got[0] != 51 || got[9] != 60 {
		t.Fatalf("cursor call: seqs %v, want 51..60", got)
	}
	var ce *CorruptError
	if err := w.Iterate(51, func(uint64, []byte) error { return nil }); !errors.As(err, &ce) {
		t.Fatalf("a plain Iterate from 51 = %v, want the damage found", err)
	}
}
