package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// This file reads tidwall/wal segment files directly: listing a WAL
// directory the way tidwall does, a buffered frame reader, the start-up
// verification scan and the sequential replay used by Iterate.

// walSegment is one segment file; index is the seq of its first entry (the
// 20-digit file name).
type walSegment struct {
	index uint64
	path  string
}

// walListing is what a WAL directory holds.
type walListing struct {
	// segs are the live segments in order. When a tidwall TruncateFront was
	// interrupted, the START file is already in segs (as tidwall's own
	// recovery would treat it) and obsolete lists the files it replaces.
	segs     []walSegment
	start    int      // position of the START file in segs, or -1
	obsolete []string // segment files made obsolete by the START file
	temps    []string // leftover *.TEMP files from an interrupted truncate
}

// listWALDir lists dir exactly like tidwall/wal's load does: names whose
// first 20 characters are a non-zero decimal index, either bare or with
// a .START / .END suffix; everything else is ignored.
func listWALDir(dir string) (walListing, error) {
	l := walListing{start: -1}
	des, err := os.ReadDir(dir) // sorted by name, like tidwall's ioutil.ReadDir
	if err != nil {
		return l, fmt.Errorf("journal: list WAL dir: %w", err)
	}
	var all []walSegment
	start := -1
	for _, de := range des {
		name := de.Name()
		if de.IsDir() || len(name) < 20 {
			continue
		}
		index, err := strconv.ParseUint(name[:20], 10, 64)
		if err != nil || index == 0 {
			continue
		}
		path := filepath.Join(dir, name)
		switch {
		case len(name) == 20:
			all = append(all, walSegment{index, path})
		case len(name) == 26 && strings.HasSuffix(name, ".START"):
			if start != -1 {
				return l, fmt.Errorf("%w: WAL dir %s holds more than one START file", ErrCorrupt, dir)
			}
			start = len(all)
			all = append(all, walSegment{index, path})
		case len(name) == 24 && strings.HasSuffix(name, ".END"):
			// Only tidwall's TruncateBack writes END files and this package
			// never calls it.
			return l, fmt.Errorf("%w: unexpected END file %s", ErrCorrupt, path)
		case strings.HasSuffix(name, ".TEMP"):
			l.temps = append(l.temps, path)
		}
	}
	if start >= 0 {
		for _, s := range all[:start] {
			l.obsolete = append(l.obsolete, s.path)
		}
		all = all[start:]
		l.start = 0
	}
	l.segs = all
	return l, nil
}

// segmentName is tidwall's file name for a segment starting at index.
func segmentName(index uint64) string { return fmt.Sprintf("%020d", index) }

// walReadBufSize is the read size of segReader: large enough to amortise
// syscalls, small enough to stay in cache while the entries are decoded.
const walReadBufSize = 1 << 20

// segReader reads the uvarint-length-prefixed frames of one segment file
// with large sequential reads.
type segReader struct {
	f        *os.File
	buf      []byte
	r, w     int   // buf[r:w] is buffered and unread
	off      int64 // file offset of buf[r]
	size     int64 // file size when opened; frames never extend past it
	eof      bool
	frameOff int64 // file offset of the frame last returned by next
}

type frameStatus uint8

const (
	frameOK  frameStatus = iota
	frameEOF             // clean end of file
	framePad             // clean end of the entries: only preallocated zeros follow (frameOff is where they start)
	frameBad             // a frame that cannot be read; see the reason
)

func (s *segReader) reset(f *os.File, size int64) {
	if s.buf == nil {
		s.buf = make([]byte, walReadBufSize)
	}
	s.f, s.size = f, size
	s.r, s.w, s.off, s.eof, s.frameOff = 0, 0, 0, false, 0
}

// fill makes at least n bytes available in buf[r:w] unless the file ends
// first. It reads as much as fits.
func (s *segReader) fill(n int) error {
	if s.r > 0 {
		s.w = copy(s.buf, s.buf[s.r:s.w])
		s.r = 0
	}
	if n > len(s.buf) {
		nb := make([]byte, max(n, 2*len(s.buf)))
		copy(nb, s.buf[:s.w])
		s.buf = nb
	}
	for s.w < n && !s.eof {
		m, err := s.f.Read(s.buf[s.w:])
		s.w += m
		if err == io.EOF {
			s.eof = true
		} else if err != nil {
			return fmt.Errorf("journal: read %s: %w", s.f.Name(), err)
		}
	}
	return nil
}

// next returns the data of the next frame (a sub-slice of the read buffer,
// valid until the next call). For frameBad the string is the reason.
func (s *segReader) next() ([]byte, frameStatus, string, error) {
	s.frameOff = s.off
	if s.w-s.r < binary.MaxVarintLen64 && !s.eof {
		if err := s.fill(binary.MaxVarintLen64); err != nil {
			return nil, frameBad, "", err
		}
	}
	avail := s.buf[s.r:s.w]
	if len(avail) == 0 {
		return nil, frameEOF, "", nil
	}
	if avail[0] == 0 { // no frame has length 0 (an envelope has a header)
		pad, err := s.zeroToEnd()
		if err != nil {
			return nil, frameBad, "", err
		}
		if pad {
			return nil, framePad, "", nil
		}
		// Not preallocated space: read on, and the empty frame fails
		// as a damaged entry.
	}
	var size uint64
	var n int
	if avail[0] < 0x80 {
		size, n = uint64(avail[0]), 1
	} else {
		size, n = binary.Uvarint(avail)
		if n == 0 {
			return nil, frameBad, "truncated length prefix", nil
		}
		if n < 0 {
			return nil, frameBad, "invalid length prefix", nil
		}
	}
	if rem := uint64(s.size - s.off - int64(n)); s.size-s.off < int64(n) || size > rem {
		return nil, frameBad, fmt.Sprintf("truncated entry (length %d, %d bytes left in file)", size, s.size-s.off-int64(n)), nil
	}
	total := n + int(size)
	if len(avail) < total {
		if err := s.fill(total); err != nil {
			return nil, frameBad, "", err
		}
		if s.w-s.r < total {
			return nil, frameBad, "truncated entry (file shrank while reading)", nil
		}
	}
	data := s.buf[s.r+n : s.r+total]
	s.r += total
	s.off += int64(total)
	return data, frameOK, "", nil
}

// zeroToEnd reports whether every byte from the reader's offset to the
// end of the file is zero (preallocated space, see segment_writer.go). It
// reads with ReadAt and leaves the reader's state alone.
func (s *segReader) zeroToEnd() (bool, error) {
	var tmp [64 << 10]byte
	for off := s.off; off < s.size; {
		n, err := s.f.ReadAt(tmp[:min(int64(len(tmp)), s.size-off)], off)
		if !allZeroBytes(tmp[:n]) {
			return false, nil
		}
		off += int64(n)
		if err == io.EOF {
			return false, nil // the file shrank while reading: not ours to call clean
		}
		if err != nil {
			return false, fmt.Errorf("journal: read %s: %w", s.f.Name(), err)
		}
	}
	return true, nil
}

// walScan is the result of verifying a WAL directory.
type walScan struct {
	first, last uint64        // last == first-1 when there are no entries
	tailSize    int64         // bytes of the last segment that hold whole, valid entries
	tailPadded  bool          // the last segment holds preallocated zeros after tailSize (and no torn tail)
	torn        *CorruptError // a torn tail of the last segment (not yet repaired), or nil
}

// scanWAL verifies every entry of segs (which must be non-empty): framing,
// envelope checksum, seq == index, and that segments are contiguous. A bad
// last-segment tail with no valid envelope after it is reported in torn;
// anything else is a *CorruptError.
func scanWAL(segs []walSegment) (walScan, error) {
	res := walScan{first: segs[0].index}
	expected := segs[0].index
	scans := scanSegments(segs)
	for i, seg := range segs {
		if seg.index != expected {
			return res, &CorruptError{Seq: expected, Segment: seg.path,
				Reason: fmt.Sprintf("segment starts at seq %d, expected %d", seg.index, expected)}
		}
		isLast := i == len(segs)-1
		sc := &scans[i]
		bad, reason, err := sc.bad, sc.reason, sc.err
		expected = sc.next
		if err != nil {
			return res, err
		}
		if bad < 0 {
			if isLast {
				res.tailSize = sc.off
				res.tailPadded = sc.off < sc.size
			} else if sc.off < sc.size {
				// A segment is cut to its entries, durably, before the
				// next one is created: zeros here were not written by us.
				return res, &CorruptError{Seq: expected, Segment: seg.path, Offset: sc.off,
					Reason: fmt.Sprintf("%d zero bytes after the last entry of a segment that is not the last", sc.size-sc.off)}
			}
			continue
		}
		ce := &CorruptError{Seq: expected, Segment: seg.path, Offset: bad, Reason: reason}
		if !isLast {
			return res, ce
		}
		if strings.HasPrefix(reason, "seq mismatch") {
			return res, ce // a whole, checksummed entry is never a torn write
		}
		after, err := findEnvelopesAfter(seg.path, bad+1)
		if err != nil {
			return res, err
		}
		if v, ok := laterBatch(after, expected); ok {
			// A whole batch was written (and so fsynced: the journal
			// fsyncs every batch before writing the next) after the bad
			// entry: the damage is inside acknowledged data.
			ce.Reason += fmt.Sprintf("; a valid entry (seq %d) of a later batch follows at offset %d", v.seq, v.pos)
			return res, ce
		}
		if len(after) > 0 {
			// Valid entries of the same last batch follow. That batch may
			// have been fsynced and acknowledged (then this is bit rot and
			// must be refused), or a power loss wrote its pages out of
			// order (a torn batch, never acknowledged). A page that never
			// reached the disk reads back as zeros: only a whole zero page
			// in the damaged span makes it a torn write.
			lost, err := zeroPageIn(seg.path, bad, after[0].pos)
			if err != nil {
				return res, err
			}
			if !lost {
				ce.Reason += fmt.Sprintf("; a valid entry (seq %d) follows at offset %d and no page of the damaged span is unwritten", after[0].seq, after[0].pos)
				return res, ce
			}
			ce.Reason += fmt.Sprintf("; %d valid entries of the same unsynced last batch follow an unwritten page (pages written out of order before a crash)", len(after))
		}
		ce.Torn = true
		ce.Bytes = sc.size - bad
		res.torn = ce
		res.tailSize = bad
	}
	res.last = expected - 1
	return res, nil
}

// segScanResult is what scanSegment found in one segment, scanned on its
// own from the seq its name gives.
type segScanResult struct {
	bad       int64  // offset of the first bad frame, -1 if none
	reason    string // why it is bad
	err       error  // an I/O error
	next      uint64 // the seq after the last good entry
	off, size int64  // reader offset at the end of the scan, and the file size
}

// maxScanWorkers bounds the goroutines that verify segments at start-up.
const maxScanWorkers = 4

// scanSegments verifies every segment independently and concurrently (the
// segments are in the page cache after a crash or a shutdown, so this is
// CRC and framing work: it scales with cores). Each starts at the seq its
// name gives; scanWAL then walks the results in order, exactly as if it had
// scanned them one after the other, so the first problem in seq order is
// the one reported.
func scanSegments(segs []walSegment) []segScanResult {
	out := make([]segScanResult, len(segs))
	workers := min(runtime.GOMAXPROCS(0), maxScanWorkers, len(segs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r segReader
			for {
				i := int(next.Add(1) - 1)
				if i >= len(segs) {
					return
				}
				sc := &out[i]
				sc.next = segs[i].index
				sc.bad, sc.reason, sc.err = scanSegment(&r, segs[i], &sc.next)
				sc.off, sc.size = r.off, r.size
			}
		}()
	}
	wg.Wait()
	return out
}

// scanSegment verifies the entries of one segment, advancing *expected past
// every good one. It returns the offset of the first bad frame (-1 if none)
// with the reason.
func scanSegment(r *segReader, seg walSegment, expected *uint64) (int64, string, error) {
	f, err := os.Open(seg.path)
	if err != nil {
		return 0, "", fmt.Errorf("journal: open segment: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, "", fmt.Errorf("journal: stat segment: %w", err)
	}
	r.reset(f, fi.Size())
	for {
		data, st, reason, err := r.next()
		if err != nil {
			return 0, "", err
		}
		switch st {
		case frameEOF, framePad:
			return -1, "", nil
		case frameBad:
			return r.frameOff, reason, nil
		}
		seq, _, derr := DecodeEnvelope(data)
		if derr != nil {
			return r.frameOff, derr.(*EnvelopeError).reason, nil
		}
		if seq != *expected {
			return r.frameOff, fmt.Sprintf("seq mismatch: envelope carries seq %d", seq), nil
		}
		*expected++
	}
}

// foundEnvelope is a valid envelope found by findEnvelopesAfter.
type foundEnvelope struct {
	pos      int64
	seq      uint64
	batchEnd bool
}

// findEnvelopesAfter returns every position from offset from to the end of
// the file that holds a well-framed entry whose envelope verifies, in file
// order (skipping past each one found). Garbage passes the length-prefix,
// length-field and CRC checks with a probability of roughly 2^-64, so a hit
// means real data follows a bad entry.
func findEnvelopesAfter(path string, from int64) ([]foundEnvelope, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("journal: read segment: %w", err)
	}
	var out []foundEnvelope
	for q := int(min(from, int64(len(b)))); q < len(b); {
		size, n := binary.Uvarint(b[q:])
		if n <= 0 || size < EnvelopeHeaderSize || size > uint64(len(b)-q-n) {
			q++
			continue
		}
		env := b[q+n : q+n+int(size)]
		if uint64(binary.LittleEndian.Uint32(env[8:12])&^envBatchEnd) != size-EnvelopeHeaderSize {
			q++
			continue
		}
		s, _, derr := DecodeEnvelope(env)
		if derr != nil {
			q++
			continue
		}
		out = append(out, foundEnvelope{pos: int64(q), seq: s, batchEnd: EnvelopeEndsBatch(env)})
		q += n + int(size)
	}
	return out, nil
}

// lostPageSize is the unit a crash loses: a page of the page cache.
const lostPageSize = 4096

// zeroPageIn reports whether the file span [from, to) shows a page that
// never reached the disk: a whole lostPageSize-aligned page of zero bytes,
// or the page holding from, zero from `from` to its end (from is where the
// damaged entry starts, mid-page when the batch began in the page that also
// holds the end of the previous, synced batch; before the batch was written
// the rest of that page held zeros: preallocated space, or beyond the end
// of the file, so if the page was lost it reads back as the synced bytes
// and zeros after them).
func zeroPageIn(path string, from, to int64) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("journal: read segment: %w", err)
	}
	to = min(to, int64(len(b)))
	// The page holding from (from `from` on), then every whole page up to to.
	for p, end := from, (from/lostPageSize+1)*lostPageSize; end <= to; p, end = end, end+lostPageSize {
		if allZeroBytes(b[p:end]) {
			return true, nil
		}
	}
	return false, nil
}

func allZeroBytes(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// laterBatch decides whether valid entries found after a bad one (which
// should carry seq bad) prove that the bad entry was fsynced. The journal
// writes one batch at a time and fsyncs it before writing the next, so at a
// crash only the last batch can be partly on disk. The entries after the
// bad one belong to that same batch unless one of them ends a batch and
// another valid entry follows it (a later batch was written, so the bad
// one's batch had been fsynced), or one carries a seq that cannot follow.
// It returns the first entry that proves a later batch.
func laterBatch(after []foundEnvelope, bad uint64) (foundEnvelope, bool) {
	for i, v := range after {
		if v.seq <= bad {
			return v, true // not a continuation of the log: damage, not a torn batch
		}
		if v.batchEnd && i+1 < len(after) {
			return after[i+1], true
		}
	}
	return foundEnvelope{}, false
}

// iterateSegments replays entries from..last (inclusive, from >= the first
// segment's index) from segs, verifying each envelope, and calls fn for every
// entry with seq >= from. An error returned by fn is returned unchanged.
func iterateSegments(segs []walSegment, from, last uint64, fn func(seq uint64, payload []byte) error) error {
	return iterateSegmentsCursor(segs, from, last, nil, fn)
}

// iterateSegmentsCursor is iterateSegments starting at cur's position when
// it is at from, and leaving cur (if not nil) at the entry after the last
// one visited.
func iterateSegmentsCursor(segs []walSegment, from, last uint64, cur *WALCursor, fn func(seq uint64, payload []byte) error) error {
	if from > last {
		return nil
	}
	// The last segment whose first index is <= from.
	i := sort.Search(len(segs), func(i int) bool { return segs[i].index > from }) - 1
	if i < 0 {
		return fmt.Errorf("%w: seq %d precedes the first segment", ErrOutOfRange, from)
	}
	expected, start := segs[i].index, int64(0)
	var r *segReader
	if cur == nil {
		r = new(segReader)
	} else {
		if cur.r.buf == nil {
			cur.r.buf = make([]byte, walCursorBufSize)
		}
		r = &cur.r
		if cur.at(segs[i], from) {
			expected, start = from, cur.off
		}
		cur.path = "" // set again below if the iteration ends well
	}
	for ; i < len(segs) && expected <= last; i++ {
		seg := segs[i]
		if seg.index != expected && start == 0 {
			return &CorruptError{Seq: expected, Segment: seg.path,
				Reason: fmt.Sprintf("segment starts at seq %d, expected %d", seg.index, expected)}
		}
		next, err := iterateSegment(r, seg, start, &expected, from, last, fn)
		start = 0
		if cur != nil && next >= 0 {
			cur.path, cur.seg, cur.off, cur.next = seg.path, seg.index, next, expected
		}
		if err != nil {
			return err
		}
	}
	if expected <= last {
		return &CorruptError{Seq: expected, Segment: segs[len(segs)-1].path,
			Reason: fmt.Sprintf("WAL ends before seq %d (last seq %d)", expected, last)}
	}
	return nil
}

// iterateSegment reads seg's entries from file offset start (the frame of
// entry *expected) while *expected <= last, calling fn for those from from
// on. It returns the file offset of the frame of entry *expected when it
// stopped inside the segment (after last, or on fn's error, which leaves
// *expected at the entry fn refused), and -1 when the segment's entries
// ended or could not be read. After last, that offset is where the entries
// end: if the segment is full, entry *expected will be the first of the
// next file, and WALCursor.at finds the cursor does not match it.
func iterateSegment(r *segReader, seg walSegment, start int64, expected *uint64, from, last uint64, fn func(uint64, []byte) error) (int64, error) {
	f, err := os.Open(seg.path)
	if err != nil {
		return -1, fmt.Errorf("journal: open segment: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return -1, fmt.Errorf("journal: stat segment: %w", err)
	}
	if start > 0 {
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return -1, fmt.Errorf("journal: seek segment: %w", err)
		}
	}
	r.reset(f, fi.Size())
	r.off = start
	for *expected <= last {
		data, st, reason, err := r.next()
		if err != nil {
			return -1, err
		}
		switch st {
		case frameEOF, framePad:
			return -1, nil // the next segment must start at *expected
		case frameBad:
			return -1, &CorruptError{Seq: *expected, Segment: seg.path, Offset: r.frameOff, Reason: reason}
		}
		if *expected >= from {
			seq, payload, derr := DecodeEnvelope(data)
			if derr != nil {
				return -1, &CorruptError{Seq: *expected, Segment: seg.path, Offset: r.frameOff,
					Reason: derr.(*EnvelopeError).reason}
			}
			if seq != *expected {
				return -1, &CorruptError{Seq: *expected, Segment: seg.path, Offset: r.frameOff,
					Reason: fmt.Sprintf("seq mismatch: envelope carries seq %d", seq)}
			}
			if err := fn(seq, payload); err != nil {
				return r.frameOff, err
			}
		}
		*expected++
	}
	return r.off, nil
}

// readSegmentEntry returns a copy of the payload of seq by scanning its
// segment (used by read-only WALs, which have no tidwall index).
func readSegmentEntry(segs []walSegment, seq uint64) ([]byte, error) {
	var out []byte
	stop := errors.New("stop")
	err := iterateSegments(segs, seq, seq, func(_ uint64, p []byte) error {
		out = append([]byte(nil), p...)
		return stop
	})
	if err == stop {
		err = nil
	}
	return out, err
}
