package journal

// These tests prove that the WAL's own segment writer produces tidwall/wal's
// format: the files (names and bytes) equal what tidwall's writer produces
// for the same batches, tidwall reads our segments and we read (and extend)
// tidwall's, segments are cut right after the entry that fills one, and a
// crash in the middle of a write is repaired exactly as for a
// tidwall-written WAL.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/tidwall/wal"
)

// walTestBatches splits seqs from..from+n-1 into random batch sizes
// (1..maxBatch).
func walTestBatches(r *rand.Rand, from uint64, n, maxBatch int) [][]Entry {
	var out [][]Entry
	for n > 0 {
		b := min(n, 1+r.IntN(maxBatch))
		es := make([]Entry, b)
		for i := range es {
			es[i] = Entry{Seq: from, Payload: walTestPayload(from)}
			from++
		}
		out = append(out, es)
		n -= b
	}
	return out
}

// walTestTidwallWrite writes batches with tidwall's own writer, framing each
// entry as AppendBatch does (batch-end mark on the last entry of a batch).
func walTestTidwallWrite(t testing.TB, dir string, segSize int, batches [][]Entry) {
	t.Helper()
	tw, err := wal.Open(dir, &wal.Options{NoSync: true, SegmentSize: segSize, LogFormat: wal.Binary})
	if err != nil {
		t.Fatal(err)
	}
	var b wal.Batch
	for _, es := range batches {
		b.Clear()
		for i, e := range es {
			b.Write(e.Seq, appendEnvelope(nil, e.Seq, e.Payload, i == len(es)-1))
		}
		if err := tw.WriteBatch(&b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// walTestConcat returns the bytes of every segment of dir, in order.
func walTestConcat(t testing.TB, dir string) []byte {
	t.Helper()
	var all []byte
	for _, p := range walTestSegments(t, dir) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// walTestTidwallRead checks that tidwall opens dir and reads first..last
// as the envelopes of the deterministic payloads.
func walTestTidwallRead(t testing.TB, dir string, first, last uint64) {
	t.Helper()
	tw, err := wal.Open(dir, &wal.Options{NoSync: true, LogFormat: wal.Binary, AllowEmpty: true})
	if err != nil {
		t.Fatalf("tidwall Open: %v", err)
	}
	defer tw.Close()
	fi, _ := tw.FirstIndex()
	li, _ := tw.LastIndex()
	if fi != first || li != last {
		t.Fatalf("tidwall sees %d..%d, want %d..%d", fi, li, first, last)
	}
	for seq := first; seq <= last; seq++ {
		data, err := tw.Read(seq)
		if err != nil {
			t.Fatalf("tidwall Read(%d): %v", seq, err)
		}
		got, p, err := DecodeEnvelope(data)
		if err != nil || got != seq || !bytes.Equal(p, walTestPayload(seq)) {
			t.Fatalf("tidwall Read(%d): seq %d, %v", seq, got, err)
		}
	}
}

// TestSegWriterMatchesTidwall: for the same batches, the segment files are
// tidwall's files, byte for byte, and each side reads what the other wrote.
func TestSegWriterMatchesTidwall(t *testing.T) {
	r := walTestRand(t)
	for round := 0; round < 6; round++ {
		segSize := []int{300, 1024, 8 << 10, 1 << 20}[r.IntN(4)]
		batches := walTestBatches(r, 1, 200+r.IntN(1500), 1+r.IntN(64))
		last := batches[len(batches)-1][len(batches[len(batches)-1])-1].Seq

		ours := t.TempDir()
		w := walTestOpen(t, ours, Options{SegmentSize: segSize, NoSync: true})
		for _, es := range batches {
			if err := w.AppendBatch(es); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		theirs := t.TempDir()
		walTestTidwallWrite(t, theirs, segSize, batches)

		a, b := walTestSegments(t, ours), walTestSegments(t, theirs)
		if len(a) != len(b) {
			t.Fatalf("round %d: %d segments, tidwall wrote %d", round, len(a), len(b))
		}
		for i := range a {
			x, _ := os.ReadFile(a[i])
			y, _ := os.ReadFile(b[i])
			if filepath.Base(a[i]) != filepath.Base(b[i]) || !bytes.Equal(x, y) {
				t.Fatalf("round %d: segment %s (%d bytes) differs from tidwall's %s (%d bytes)",
					round, filepath.Base(a[i]), len(x), filepath.Base(b[i]), len(y))
			}
		}
		walTestTidwallRead(t, ours, 1, last)
		ro, err := OpenReadOnly(theirs)
		if err != nil {
			t.Fatalf("round %d: OpenReadOnly of tidwall's WAL: %v", round, err)
		}
		walTestCheck(t, ro, 1, last)
		ro.Close()

		// An existing tidwall WAL is opened and extended by our writer.
		w = walTestOpen(t, theirs, Options{SegmentSize: segSize})
		walTestAppend(t, w, 300, 40, r)
		walTestCheck(t, w, 1, last+300)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		walTestTidwallRead(t, theirs, 1, last+300)
	}
}

// TestSegWriterRotation: a segment is cut right after the entry that brings
// it to SegmentSize (inside a batch if need be), the next one is named by
// its first seq, a batch larger than a segment spans several, and every
// entry keeps its batch-end mark wherever the batch was cut.
func TestSegWriterRotation(t *testing.T) {
	r := walTestRand(t)
	const segSize = 2048
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{SegmentSize: segSize, NoSync: true})
	batches := walTestBatches(r, 1, 3000, 30)
	big := make([]Entry, 200) // spans several segments
	for i := range big {
		seq := uint64(3001 + i)
		big[i] = Entry{Seq: seq, Payload: walTestPayload(seq)}
	}
	batches = append(batches, big)
	isEnd := map[uint64]bool{}
	for _, es := range batches {
		if err := w.AppendBatch(es); err != nil {
			t.Fatal(err)
		}
		isEnd[es[len(es)-1].Seq] = true
		if w.tail.size >= segSize {
			t.Fatalf("the tail holds %d bytes, a new segment should have started", w.tail.size)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs := walTestSegments(t, dir)
	if len(segs) < 20 {
		t.Fatalf("only %d segments", len(segs))
	}
	seq := uint64(1)
	for i, p := range segs {
		if got := walSegIndex(t, p); got != seq {
			t.Fatalf("segment %d is named %d, holds seq %d first", i, got, seq)
		}
		frames := walTestFrames(t, p)
		n := len(frames) - 1
		for k, end := range walTestBatchEnds(t, p) {
			if end != isEnd[seq+uint64(k)] {
				t.Fatalf("seq %d: batch-end mark %v, want %v", seq+uint64(k), end, isEnd[seq+uint64(k)])
			}
		}
		if i < len(segs)-1 && (n == 0 || frames[n-1] >= segSize || frames[n] < segSize) {
			t.Fatalf("segment %d: last entry spans %d..%d, limit %d", i, frames[max(n-1, 0)], frames[n], segSize)
		}
		if i == len(segs)-1 && frames[n] >= segSize {
			t.Fatalf("last segment holds %d bytes", frames[n])
		}
		seq += uint64(n)
	}
	if seq != 3201 {
		t.Fatalf("segments hold seqs up to %d, want 3200", seq-1)
	}
}

// TestSegWriterCrashMidWrite: a crash while a batch is being written leaves
// a prefix of its bytes; Open keeps the whole entries of that prefix and
// truncates the rest, with the same outcome as for the same bytes written
// by tidwall, and the WAL then continues normally.
func TestSegWriterCrashMidWrite(t *testing.T) {
	r := walTestRand(t)
	const segSize = 1 << 20
	batches := walTestBatches(r, 1, 400, 25)
	torn := walTestBatches(r, 401, 60, 60)[0] // the batch the crash interrupts
	last := uint64(400)

	// The bytes the writer would have produced for the torn batch.
	scratch := t.TempDir()
	w := walTestOpen(t, scratch, Options{SegmentSize: segSize, NoSync: true, FirstSeq: 401})
	if err := w.AppendBatch(torn); err != nil {
		t.Fatal(err)
	}
	w.Close()
	tornBytes := walTestConcat(t, scratch)
	tornFrames := walTestFrames(t, walTestSegments(t, scratch)[0])

	ours := t.TempDir()
	w = walTestOpen(t, ours, Options{SegmentSize: segSize, NoSync: true})
	for _, es := range batches {
		if err := w.AppendBatch(es); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	theirs := t.TempDir()
	walTestTidwallWrite(t, theirs, segSize, batches)

	// Cuts around a random sample of the frame boundaries, and anywhere;
	// -short (make test) samples ~40% as many (each cut reopens two WALs).
	stride, random := 5, 10
	if testing.Short() {
		stride, random = 15, 4
	}
	cuts := []int{1, len(tornBytes) - 1}
	for i := 1; i < len(tornFrames)-1; i += 1 + r.IntN(stride) {
		f := int(tornFrames[i])
		cuts = append(cuts, f-1, f, f+1)
	}
	for i := 0; i < random; i++ {
		cuts = append(cuts, 1+r.IntN(len(tornBytes)-1))
	}
	type outcome struct {
		last uint64
		torn bool
		size int64
	}
	for _, cut := range cuts {
		whole := 0 // whole entries in the prefix
		for whole+1 < len(tornFrames) && tornFrames[whole+1] <= int64(cut) {
			whole++
		}
		var got [2]outcome
		for k, base := range []string{ours, theirs} {
			dir := walTestCopyDir(t, base)
			seg := walTestSegments(t, dir)
			path := seg[len(seg)-1]
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tornBytes[:cut])
			f.Close()
			w, err := Open(dir, Options{SegmentSize: segSize, NoSync: true, Logger: walQuietLogger()})
			if err != nil {
				t.Fatalf("cut %d: Open: %v", cut, err)
			}
			got[k] = outcome{w.LastSeq(), w.TornTail() != nil, walTestEntriesEnd(t, path)}
			walTestAppend(t, w, 7, 3, nil)
			walTestCheck(t, w, 1, got[k].last+7)
			w.Close()
			walTestTidwallRead(t, dir, 1, got[k].last+7)
		}
		want := outcome{last + uint64(whole), int64(cut) != tornFrames[whole], got[0].size}
		if got[0] != want || got[1] != got[0] {
			t.Fatalf("cut %d of %d: ours %+v, tidwall-written %+v, want %+v", cut, len(tornBytes), got[0], got[1], want)
		}
		if size := walTestFileSize(t, walTestSegments(t, ours)[0]); got[0].size != size+tornFrames[whole] {
			t.Fatalf("cut %d: repaired segment is %d bytes, want %d", cut, got[0].size, size+tornFrames[whole])
		}
	}
}

// TestSegWriterFailedWriteIsSticky: a write error (here: the tail file was
// closed under the writer) fails the WAL; nothing is acknowledged.
func TestSegWriterFailedWriteIsSticky(t *testing.T) {
	dir := t.TempDir()
	w := walTestOpen(t, dir, Options{NoSync: true})
	walTestAppend(t, w, 10, 5, nil)
	w.tail.f.Close()
	err := w.AppendBatch([]Entry{{Seq: 11, Payload: walTestPayload(11)}})
	if !errors.Is(err, ErrFailed) || w.LastSeq() != 10 {
		t.Fatalf("AppendBatch on a broken file = %v (LastSeq %d)", err, w.LastSeq())
	}
	if err := w.AppendBatch([]Entry{{Seq: 11}}); !errors.Is(err, ErrFailed) {
		t.Fatalf("second AppendBatch = %v", err)
	}
	w.Close()
	w = walTestOpen(t, dir, Options{})
	walTestCheck(t, w, 1, 10)
	w.Close()
}

// FuzzScanSegment feeds arbitrary bytes to the segment reader as the only
// segment of a WAL: it never panics, never accepts bytes that tidwall would
// read differently, and a torn tail is always cut at a frame boundary.
func FuzzScanSegment(f *testing.F) {
	var valid []byte
	for seq := uint64(1); seq <= 5; seq++ {
		env := appendEnvelope(nil, seq, walTestPayload(seq), seq == 3 || seq == 5)
		valid = append(binary.AppendUvarint(valid, uint64(len(env))), env...)
	}
	f.Add(valid)
	for _, n := range []int{0, 1, 2, 17, len(valid) / 2, len(valid) - 1} {
		f.Add(bytes.Clone(valid[:n]))
	}
	f.Add(append(bytes.Clone(valid), make([]byte, 4096)...))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0x00})
	f.Add(append(bytes.Clone(valid[:len(valid)/2]), make([]byte, 300)...)) // torn, then preallocated zeros
	f.Add(append(append(bytes.Clone(valid), 0), valid[:40]...))            // a zero, then not only zeros
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, segmentName(1))
		if err := os.WriteFile(path, data, 0o640); err != nil {
			t.Fatal(err)
		}
		ro, err := OpenReadOnly(dir)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenReadOnly: %v, want ErrCorrupt", err)
			}
			return
		}
		last := ro.LastSeq()
		n := uint64(0)
		if err := ro.Iterate(0, func(seq uint64, p []byte) error { n++; return nil }); err != nil || n != last {
			t.Fatalf("Iterate saw %d of %d entries: %v", n, last, err)
		}
		end := int64(len(data))
		var ce *CorruptError
		if tt := ro.TornTail(); tt != nil {
			if !errors.As(tt, &ce) || !ce.Torn || ce.Offset+ce.Bytes != end {
				t.Fatalf("torn tail %v does not run to the end (%d bytes)", tt, end)
			}
			end = ce.Offset
		} else {
			// The `last` accepted entries are whole frames, and only
			// zeros (preallocated space) may follow them.
			entries := walTestFramesEnd(t, data, last)
			if !allZeroBytes(data[entries:]) {
				t.Fatalf("entries end at %d of %d bytes, and what follows is not zeros", entries, end)
			}
			end = entries
		}
		// The accepted prefix is exactly `last` whole frames that tidwall
		// reads the same way.
		if frames := walTestFramesOf(t, data[:end]); uint64(len(frames)) != last {
			t.Fatalf("accepted %d entries in %d bytes that hold %d frames", last, end, len(frames))
		}
		if err := os.WriteFile(path, data[:end], 0o640); err != nil {
			t.Fatal(err)
		}
		walTestTidwallReadAny(t, dir, last)
	})
}

// walTestFramesEnd is the offset in b right after its first n frames
// (which must be whole).
func walTestFramesEnd(t testing.TB, b []byte, n uint64) int64 {
	t.Helper()
	off := 0
	for ; n > 0; n-- {
		size, k := binary.Uvarint(b[off:])
		if k <= 0 || size > uint64(len(b)-off-k) {
			t.Fatalf("no whole frame at offset %d of %d bytes", off, len(b))
		}
		off += k + int(size)
	}
	return int64(off)
}

// walTestFramesOf splits b into uvarint-length-prefixed frames (b must be
// exactly whole frames).
func walTestFramesOf(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			t.Fatalf("not whole frames: %x", b)
		}
		out = append(out, b[k:k+int(size)])
		b = b[k+int(size):]
	}
	return out
}

// walTestTidwallReadAny checks that tidwall sees entries 1..last in dir.
func walTestTidwallReadAny(t testing.TB, dir string, last uint64) {
	t.Helper()
	tw, err := wal.Open(dir, &wal.Options{NoSync: true, LogFormat: wal.Binary, AllowEmpty: true})
	if err != nil {
		t.Fatalf("tidwall Open: %v", err)
	}
	defer tw.Close()
	if li, _ := tw.LastIndex(); li != last {
		t.Fatalf("tidwall sees last index %d, we accepted %d", li, last)
	}
}
