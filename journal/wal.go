package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/tidwall/wal"
)

// DefaultSegmentSize is the default target size of a WAL segment file.
// tidwall keeps the whole current segment in one in-memory buffer that is
// grown by copying into fresh memory, and on this paravirtualised VM the page
// faults on fresh memory dominate the journaler's kernel time. Measured with
// `bench pipeline --rate 500000 --batch 16` (ack p99, two runs each):
// 16 MiB 43–85 ms, 4 MiB 15–37 ms, 2 MiB 21 ms, 1 MiB 14 ms, 512 KiB
// 18–21 ms, 256 KiB 18 ms (rotation costs a file create and a directory
// fsync). 1 MiB is the knee; it rotates ~every 23k commands.
const DefaultSegmentSize = 1 << 20

// Options configure Open. The zero value is the production configuration.
type Options struct {
	// SegmentSize is the target size of a segment file; a new segment is
	// started once the current one reaches it. Default DefaultSegmentSize.
	SegmentSize int
	// NoSync disables every fsync (batches, directory, tail repair).
	// Acknowledged entries are then NOT durable against power loss or
	// kernel crash. For tests and benchmarks only.
	NoSync bool
	// FirstSeq is the seq of the first entry of a brand-new WAL (default 1).
	// Use S+1 when starting from a snapshot at seq S with no WAL. It is used
	// only when dir holds no segment file; an existing WAL keeps its own
	// position (check FirstSeq()/LastSeq() against your snapshot, or let
	// Iterate(S+1) do it).
	FirstSeq uint64
	// Logger receives warnings (tail repair) and errors. Default
	// slog.Default().
	Logger *slog.Logger
	// MinLastSeq, if > 0, is a seq the WAL must still hold after a torn
	// tail is repaired: the seq of the newest snapshot, which is written
	// only once its seq is durable. A WAL that ends below it (a "torn" tail
	// inside fsynced entries is bit rot, not a crash) is refused before
	// anything on disk is changed.
	MinLastSeq uint64
}

// Entry is one journaled command.
type Entry struct {
	Seq     uint64
	Payload []byte
}

// WAL is the write-ahead log: tidwall/wal segment files whose entries are
// envelopes (see the package doc), with start-up verification, torn-tail
// repair, group commit and a sticky failure state.
//
// Invariant: the tidwall index of every entry equals its seq.
//
// All methods are safe for concurrent use; AppendBatch, Read and
// TruncateFront serialise on one mutex, FirstSeq/LastSeq are lock-free.
type WAL struct {
	dir  string
	opts Options
	log  *slog.Logger
	ro   bool

	first atomic.Uint64 // seq of the first entry; LastSeq()+1 when empty
	last  atomic.Uint64 // seq of the last durable entry; FirstSeq()-1 when empty

	// iterMu keeps TruncateFront (which deletes segment files) away from
	// running Iterate calls.
	iterMu sync.RWMutex

	mu        sync.Mutex
	tw        *wal.Log // nil when read-only
	batch     wal.Batch
	scratch   []byte
	tailIndex uint64 // first index of tidwall's current (last) segment
	tailBytes int64  // its size in bytes; mirrors tidwall's rotation rule
	tailPath  string // its path (cached: stat'ed after every synced batch)
	failErr   error  // sticky; wraps ErrFailed
	closed    bool
	torn      *CorruptError // torn tail found by the open scan
	roSegs    []walSegment  // read-only: the verified segment list

	// Test seams: fsync of the current segment and of the directory.
	syncFile func() error
	syncDir  func() error
}

// Open opens (or creates) the WAL in dir for appending.
//
// Every segment is verified first (framing, CRC-32C, seq == index,
// contiguity). A torn last-segment tail (partial or damaged entries with no
// valid entry after them) is truncated back to the last whole entry, the
// file and directory are fsynced and a warning names the dropped seqs; the
// details stay available from TornTail. Any other damage fails Open with a
// *CorruptError (errors.Is(err, ErrCorrupt)) naming the seq and segment.
func Open(dir string, opts Options) (*WAL, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.FirstSeq == 0 {
		opts.FirstSeq = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w := &WAL{dir: dir, opts: opts, log: opts.Logger}
	w.syncFile = func() error { return w.tw.Sync() }
	w.syncDir = func() error { return walFsyncDir(dir) }

	if err := w.prepareDir(); err != nil {
		return nil, err
	}
	l, err := listWALDir(dir)
	if err != nil {
		return nil, err
	}
	for _, p := range l.temps {
		_ = os.Remove(p)
	}
	if l.start >= 0 {
		// Finish an interrupted TruncateFront the way tidwall would, but
		// durably, before verifying.
		for _, p := range l.obsolete {
			if err := os.Remove(p); err != nil {
				return nil, fmt.Errorf("journal: finish truncate: %w", err)
			}
		}
		final := filepath.Join(dir, segmentName(l.segs[0].index))
		if err := os.Rename(l.segs[0].path, final); err != nil {
			return nil, fmt.Errorf("journal: finish truncate: %w", err)
		}
		l.segs[0].path = final
		if err := w.fsyncDir(); err != nil {
			return nil, err
		}
	}
	if len(l.segs) == 0 {
		seg, err := w.createFirstSegment()
		if err != nil {
			return nil, err
		}
		l.segs = []walSegment{seg}
	}
	sc, err := scanWAL(l.segs)
	if err != nil {
		return nil, err
	}
	if opts.MinLastSeq > 0 && sc.last < opts.MinLastSeq {
		ce := &CorruptError{Seq: sc.last + 1, Segment: l.segs[len(l.segs)-1].path,
			Reason: fmt.Sprintf("the WAL ends at seq %d but a snapshot covers seq %d: durable entries are missing", sc.last, opts.MinLastSeq)}
		if sc.torn != nil {
			ce.Offset = sc.torn.Offset
			ce.Reason += " (damaged entry: " + sc.torn.Reason + "); refusing to repair"
		}
		return nil, ce
	}
	if sc.torn != nil {
		if err := w.repairTail(sc.torn); err != nil {
			return nil, err
		}
	}
	tw, err := wal.Open(dir, &wal.Options{
		NoSync:           true, // one fsync per AppendBatch, issued here
		SegmentSize:      opts.SegmentSize,
		LogFormat:        wal.Binary,
		SegmentCacheSize: 2,
		NoCopy:           true, // Read copies the payload out itself
		AllowEmpty:       true, // empty logs that start at seq > 1
		DirPerms:         0o750,
		FilePerms:        0o640,
	})
	if err != nil {
		return nil, fmt.Errorf("journal: open tidwall log: %w", err)
	}
	fi, err1 := tw.FirstIndex()
	li, err2 := tw.LastIndex()
	if err := errors.Join(err1, err2); err != nil || fi != sc.first || li != sc.last {
		_ = tw.Close()
		if err != nil {
			return nil, fmt.Errorf("journal: open tidwall log: %w", err)
		}
		return nil, fmt.Errorf("%w: tidwall sees seqs %d..%d, verification saw %d..%d",
			ErrCorrupt, fi, li, sc.first, sc.last)
	}
	w.tw = tw
	w.first.Store(sc.first)
	w.last.Store(sc.last)
	w.setTail(l.segs[len(l.segs)-1].index, sc.tailSize)
	w.torn = sc.torn
	return w, nil
}

// OpenReadOnly opens dir for reading and verification only; nothing on disk
// is modified (not even a torn tail, or an interrupted truncate). The WAL
// serves FirstSeq, LastSeq, Read and Iterate up to the last whole entry; a
// torn tail is reported by TornTail instead of an error. Corruption
// elsewhere fails with a *CorruptError, as in Open.
func OpenReadOnly(dir string) (*WAL, error) {
	w := &WAL{dir: dir, ro: true, log: slog.Default()}
	l, err := listWALDir(dir)
	if err != nil {
		return nil, err
	}
	if len(l.segs) == 0 {
		w.first.Store(1)
		return w, nil
	}
	sc, err := scanWAL(l.segs)
	if err != nil {
		return nil, err
	}
	w.first.Store(sc.first)
	w.last.Store(sc.last)
	w.torn = sc.torn
	w.roSegs = l.segs
	return w, nil
}

// FirstSeq is the seq of the first entry held. For an empty WAL it is the
// seq the next entry will get (LastSeq()+1): 1 for a brand-new default WAL,
// S+1 for a new WAL created with Options.FirstSeq = S+1.
func (w *WAL) FirstSeq() uint64 { return w.first.Load() }

// LastSeq is the seq of the last durable entry, FirstSeq()-1 when empty
// (so 0 for a brand-new default WAL). The next AppendBatch must start at
// LastSeq()+1.
func (w *WAL) LastSeq() uint64 { return w.last.Load() }

// TornTail returns the torn tail found when the WAL was opened, as a
// *CorruptError matching ErrTornTail, or nil. For Open it has already been
// truncated away; for OpenReadOnly it is still on disk.
func (w *WAL) TornTail() error {
	if w.torn == nil {
		return nil
	}
	return w.torn
}

// AppendBatch journals entries durably: their seqs must run contiguously
// from LastSeq()+1 (otherwise ErrOutOfOrder and nothing is written). All
// entries go out in one write and one fsync (plus a directory fsync when a
// segment file may have been created); when AppendBatch returns nil they
// are durable. A write or fsync error puts the WAL in the failed state:
// this and every later call return an error matching ErrFailed.
// Payloads are copied; the caller may reuse them on return.
func (w *WAL) AppendBatch(entries []Entry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writable(); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	next := w.last.Load() + 1
	for i := range entries {
		if want := next + uint64(i); entries[i].Seq != want {
			return fmt.Errorf("%w: batch entry %d has seq %d, want %d", ErrOutOfOrder, i, entries[i].Seq, want)
		}
		if n := len(entries[i].Payload); n > MaxPayloadSize {
			return fmt.Errorf("%w: seq %d has %d bytes (max %d)", ErrPayloadTooLarge, entries[i].Seq, n, MaxPayloadSize)
		}
	}
	w.batch.Clear()
	for i := range entries {
		if i == len(entries)-1 {
			w.scratch = AppendEnvelopeBatchEnd(w.scratch[:0], entries[i].Seq, entries[i].Payload)
		} else {
			w.scratch = AppendEnvelope(w.scratch[:0], entries[i].Seq, entries[i].Payload)
		}
		w.batch.Write(entries[i].Seq, w.scratch)
	}
	rotated, tailIndex, tailBytes := w.predictRotation(entries)
	if err := w.tw.WriteBatch(&w.batch); err != nil {
		return w.fail("write batch", err)
	}
	if !w.opts.NoSync {
		if !rotated && !w.tailMatches(tailIndex, tailBytes) {
			// Our model of tidwall's segment rotation is off: assume a
			// segment was created, fsync the directory, and resynchronise.
			rotated = true
			w.log.Warn("journal: WAL segment tracking drifted; resynchronising")
			if ti, tb, err := w.statTail(); err == nil {
				tailIndex, tailBytes = ti, tb
			}
		}
		if err := w.syncFile(); err != nil {
			return w.fail("fsync segment", err)
		}
		if rotated {
			if err := w.syncDir(); err != nil {
				return w.fail("fsync WAL dir", err)
			}
		}
	}
	w.setTail(tailIndex, tailBytes)
	w.last.Store(entries[len(entries)-1].Seq)
	return nil
}

// predictRotation applies tidwall's rule (start a new segment before a
// write when the tail exceeds SegmentSize, and after any entry that brings
// it to SegmentSize or more) to the batch.
func (w *WAL) predictRotation(entries []Entry) (rotated bool, tailIndex uint64, tailBytes int64) {
	seg := int64(w.opts.SegmentSize)
	tailIndex, tailBytes = w.tailIndex, w.tailBytes
	if tailBytes > seg {
		rotated, tailIndex, tailBytes = true, entries[0].Seq, 0
	}
	for i := range entries {
		n := uint64(EnvelopeHeaderSize + len(entries[i].Payload))
		tailBytes += int64(uvarintLen(n) + n)
		if tailBytes >= seg {
			rotated, tailIndex, tailBytes = true, entries[i].Seq+1, 0
		}
	}
	return rotated, tailIndex, tailBytes
}

func uvarintLen(x uint64) uint64 {
	n := uint64(1)
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

func (w *WAL) setTail(index uint64, size int64) {
	if index != w.tailIndex || w.tailPath == "" {
		w.tailPath = filepath.Join(w.dir, segmentName(index))
	}
	w.tailIndex, w.tailBytes = index, size
}

// tailMatches checks with one stat that the tail segment is where and as
// large as predicted. Batch bytes that tidwall put into a segment we did not
// predict are missing from the predicted file, so every such batch is
// caught before it is acknowledged.
func (w *WAL) tailMatches(index uint64, size int64) bool {
	if index != w.tailIndex {
		return false // only called when no rotation was predicted
	}
	fi, err := os.Stat(w.tailPath)
	return err == nil && fi.Size() == size
}

func (w *WAL) statTail() (uint64, int64, error) {
	l, err := listWALDir(w.dir)
	if err != nil || len(l.segs) == 0 {
		return 0, 0, fmt.Errorf("journal: list tail: %w", err)
	}
	s := l.segs[len(l.segs)-1]
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, 0, err
	}
	return s.index, fi.Size(), nil
}

// Read returns a copy of the payload of seq (random access through
// tidwall's segment cache; read-only WALs scan the segment). The envelope
// is verified, including seq == index.
func (w *WAL) Read(seq uint64) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return nil, err
	}
	if seq < w.first.Load() || seq > w.last.Load() {
		return nil, fmt.Errorf("%w: seq %d (WAL holds %d..%d)", ErrNotFound, seq, w.first.Load(), w.last.Load())
	}
	if w.ro {
		return readSegmentEntry(w.roSegs, seq)
	}
	data, err := w.tw.Read(seq)
	if err != nil {
		return nil, fmt.Errorf("journal: read seq %d: %w", seq, err)
	}
	got, payload, err := DecodeEnvelope(data)
	if err != nil {
		return nil, &CorruptError{Seq: seq, Segment: w.dir, Offset: -1, Reason: err.(*EnvelopeError).reason}
	}
	if got != seq {
		return nil, &CorruptError{Seq: seq, Segment: w.dir, Offset: -1,
			Reason: fmt.Sprintf("seq mismatch: envelope carries seq %d", got)}
	}
	out := make([]byte, len(payload))
	copy(out, payload)
	return out, nil
}

// Iterate calls fn for every entry from seq from (0: from FirstSeq()) to
// the LastSeq() at the time of the call, in order, reading the segment
// files sequentially and verifying every envelope. payload is valid only
// during fn. An error from fn stops the iteration and is returned as is.
// A from before FirstSeq() (those entries are gone) or after LastSeq()+1
// is an ErrOutOfRange error; from == LastSeq()+1 visits nothing.
//
// Iterate may run concurrently with AppendBatch (it only sees entries that
// were durable when it started). fn must not call TruncateFront.
func (w *WAL) Iterate(from uint64, fn func(seq uint64, payload []byte) error) error {
	w.iterMu.RLock()
	defer w.iterMu.RUnlock()
	w.mu.Lock()
	if err := w.usable(); err != nil {
		w.mu.Unlock()
		return err
	}
	first, last := w.first.Load(), w.last.Load()
	segs := w.roSegs
	if !w.ro {
		l, err := listWALDir(w.dir)
		if err != nil {
			w.mu.Unlock()
			return err
		}
		segs = l.segs
	}
	w.mu.Unlock()
	if from == 0 {
		from = first
	}
	if from < first || from > last+1 {
		return fmt.Errorf("%w: iterate from seq %d, WAL holds %d..%d", ErrOutOfRange, from, first, last)
	}
	if from > last {
		return nil
	}
	return iterateSegments(segs, from, last, fn)
}

// TruncateFront drops entries before seq, whole segments at a time: every
// segment file whose entries all precede seq is deleted (oldest first) and
// the directory fsynced; the segment holding seq is kept whole, so
// afterwards FirstSeq() <= seq and every entry from seq on is intact. seq
// may be at most LastSeq()+1; a seq at or before FirstSeq() is a no-op.
//
// Nothing is copied or rewritten, so the cost is a few unlinks plus one
// directory fsync. (tidwall's own TruncateFront rewrites the segment holding
// seq, up to SegmentSize bytes plus an fsync, while appends wait: measured
// 100–260 ms with 64 MiB segments.) The deleted files are ones tidwall only
// touches through Read and TruncateFront/Back, which never reach them: Read
// is range-checked against FirstSeq() first.
func (w *WAL) TruncateFront(seq uint64) error {
	w.iterMu.Lock()
	defer w.iterMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writable(); err != nil {
		return err
	}
	first, last := w.first.Load(), w.last.Load()
	if seq <= first {
		return nil
	}
	if seq > last+1 {
		return fmt.Errorf("%w: truncate front to seq %d, last seq is %d", ErrOutOfRange, seq, last)
	}
	l, err := listWALDir(w.dir)
	if err != nil {
		return err
	}
	segs := l.segs
	removed := 0
	for ; removed+1 < len(segs) && segs[removed+1].index <= seq; removed++ {
		if err = os.Remove(segs[removed].path); err != nil {
			err = fmt.Errorf("journal: truncate front: %w", err)
			break
		}
	}
	if removed == 0 {
		return err
	}
	if !w.opts.NoSync {
		if serr := w.syncDir(); serr != nil {
			return w.fail("fsync WAL dir after truncate", serr)
		}
	}
	w.first.Store(segs[removed].index)
	return err
}

// Close closes the WAL. A failed WAL is dropped without another fsync and
// Close returns its sticky error.
func (w *WAL) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.closed = true
	if w.ro {
		return nil
	}
	if w.failErr != nil {
		// Do not call tidwall's Close: it fsyncs again. The file is closed
		// by the os.File cleanup once the log is unreachable.
		w.tw = nil
		return w.failErr
	}
	if err := w.tw.Close(); err != nil {
		return fmt.Errorf("journal: close: %w", err)
	}
	return nil
}

// Dir returns the WAL directory.
func (w *WAL) Dir() string { return w.dir }

func (w *WAL) usable() error {
	if w.failErr != nil {
		return w.failErr
	}
	if w.closed {
		return ErrClosed
	}
	return nil
}

func (w *WAL) writable() error {
	if err := w.usable(); err != nil {
		return err
	}
	if w.ro {
		return ErrReadOnly
	}
	return nil
}

func (w *WAL) fail(op string, err error) error {
	w.failErr = fmt.Errorf("%w: %s: %w", ErrFailed, op, err)
	w.log.Error("journal: WAL failed; refusing further writes", "op", op, "err", err,
		"last_durable_seq", w.last.Load())
	return w.failErr
}

// prepareDir creates dir if needed, fsyncing each parent whose entries
// changed.
func (w *WAL) prepareDir() error {
	var created []string
	for d := filepath.Clean(w.dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("journal: WAL dir: %w", err)
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := os.MkdirAll(w.dir, 0o750); err != nil {
		return fmt.Errorf("journal: create WAL dir: %w", err)
	}
	if w.opts.NoSync {
		return nil
	}
	for _, d := range created {
		if err := walFsyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// createFirstSegment creates the empty segment a fresh WAL starts with,
// named after Options.FirstSeq (tidwall itself would always start at 1).
func (w *WAL) createFirstSegment() (walSegment, error) {
	seg := walSegment{w.opts.FirstSeq, filepath.Join(w.dir, segmentName(w.opts.FirstSeq))}
	f, err := os.OpenFile(seg.path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o640)
	if err != nil {
		return seg, fmt.Errorf("journal: create segment: %w", err)
	}
	if !w.opts.NoSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return seg, fmt.Errorf("journal: create segment: %w", err)
	}
	return seg, w.fsyncDir()
}

// repairTail truncates the last segment back to the end of its last whole
// entry.
func (w *WAL) repairTail(t *CorruptError) error {
	f, err := os.OpenFile(t.Segment, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("journal: repair torn tail: %w", err)
	}
	err = f.Truncate(t.Offset)
	if err == nil && !w.opts.NoSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: repair torn tail: %w", err)
	}
	if err := w.fsyncDir(); err != nil {
		return err
	}
	w.log.Warn("journal: truncated torn WAL tail",
		"segment", t.Segment, "offset", t.Offset, "bytes_dropped", t.Bytes,
		"dropped_from_seq", t.Seq, "last_whole_seq", t.Seq-1, "reason", t.Reason)
	return nil
}

func (w *WAL) fsyncDir() error {
	if w.opts.NoSync {
		return nil
	}
	return walFsyncDir(w.dir)
}

// walFsyncDir fsyncs a directory so that entries created, renamed or
// removed in it are durable.
func walFsyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: fsync dir: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: fsync dir %s: %w", dir, err)
	}
	return nil
}
