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
// It was chosen when tidwall wrote the segments: its writer kept the whole
// current segment in a growing in-memory buffer, whose page faults made
// large segments slow (`bench pipeline --rate 500000 --batch 16` ack p99:
// 43–85 ms at 16 MiB, 14 ms at 1 MiB). Our writer (segment_writer.go) holds
// no segment in memory; 1, 4 and 16 MiB then measured alike, within noise.
// A rotation (~every 23k commands at 1 MiB) costs one more fdatasync, a
// file create and a directory fsync; smaller segments keep TruncateFront
// fine-grained and Read cheap.
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
// repair, group commit and a sticky failure state. The segments are written
// by segWriter and read by segment_reader.go; tidwall itself only opens the
// WAL once at start-up, as a cross-check that it reads what we wrote.
//
// Invariant: the tidwall index of every entry equals its seq.
//
// All methods are safe for concurrent use; AppendBatch and TruncateFront
// serialise on one mutex (Read and Iterate take it only to copy the
// segment list's header), FirstSeq/LastSeq are lock-free.
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

	mu      sync.Mutex
	tail    *segWriter // the segment being appended to; nil when read-only
	failErr error      // sticky; wraps ErrFailed
	closed  bool
	torn    *CorruptError // torn tail found by the open scan
	// segs is every segment file, oldest first, as the directory holds
	// them: listed once by Open (or OpenReadOnly), then kept by rotate
	// (one appended) and TruncateFront (a prefix dropped). A readers' view
	// (snapshotSegments) is the slice itself: it is never written in place
	// (rotate and TruncateFront make a new one), so a view stays valid
	// without the lock. (Listing the directory for every follower batch
	// held mu, which AppendBatch waits for, through a ReadDir of every
	// segment: 26% of bench ws's CPU with an untruncated WAL.)
	segs []walSegment

	held holdPolicy // whether syncFile keeps its P (under mu)

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
	w.syncFile = func() error { return w.held.sync(w.tail.f) }
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
	// A spare segment a previous process prepared but never used (never a
	// segment: take renames it away when it uses it).
	if err := os.Remove(filepath.Join(dir, spareName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("journal: remove spare segment: %w", err)
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
	last := l.segs[len(l.segs)-1]
	if sc.torn != nil {
		if err := w.repairTail(sc.torn); err != nil {
			return nil, err
		}
	} else if sc.tailPadded {
		// The previous writer's preallocated zeros: cut them off so that
		// tidwall reads the tail (openSegWriter preallocates again).
		if err := w.truncateSegment(last.path, sc.tailSize); err != nil {
			return nil, fmt.Errorf("journal: drop preallocated tail: %w", err)
		}
		w.log.Info("journal: zeros after the last entry of the tail segment dropped (preallocated space of a process that did not close the WAL)",
			"segment", last.path, "entries_end", sc.tailSize, "last_seq", sc.last)
	}
	if err := crossCheckTidwall(dir, opts.SegmentSize, sc); err != nil {
		return nil, err
	}
	tail, perr, err := openSegWriter(dir, opts.SegmentSize, last.index, sc.tailSize, opts.NoSync)
	if perr != nil {
		w.log.Warn("journal: cannot preallocate the tail segment; appending to it (slower fsyncs)", "segment", last.path, "err", perr)
	}
	if err != nil {
		return nil, err
	}
	tail.spares = newSpareMaker(dir, int64(opts.SegmentSize), opts.NoSync, w.log)
	w.tail = tail
	w.segs = l.segs
	if !opts.NoSync {
		// What the open scan accepted may be a previous process's unsynced
		// writes (it crashed after write, before fsync). They are about to
		// be replayed and built upon, so they must be durable first, and so
		// must the directory entries of every segment, before a later
		// rotation adds a file behind them.
		if err := w.syncFile(); err != nil {
			tail.close()
			return nil, fmt.Errorf("journal: fsync tail segment: %w", err)
		}
		if err := w.syncDir(); err != nil {
			tail.close()
			return nil, err
		}
	}
	w.first.Store(sc.first)
	w.last.Store(sc.last)
	w.torn = sc.torn
	return w, nil
}

// crossCheckTidwall opens the verified WAL with tidwall/wal itself and
// checks that it sees the same seqs: the files we write must stay readable
// by the library that defines their format. tidwall's Open reads the last
// segment and changes nothing on disk here (the directory holds no START,
// END or missing segment any more); its Close fsyncs the last segment,
// which is already durable.
func crossCheckTidwall(dir string, segmentSize int, sc walScan) error {
	tw, err := wal.Open(dir, &wal.Options{
		NoSync:           true,
		SegmentSize:      segmentSize,
		LogFormat:        wal.Binary,
		SegmentCacheSize: 1,
		NoCopy:           true,
		AllowEmpty:       true, // empty logs that start at seq > 1
		DirPerms:         0o750,
		FilePerms:        0o640,
	})
	if err != nil {
		return fmt.Errorf("journal: open tidwall log: %w", err)
	}
	fi, err1 := tw.FirstIndex()
	li, err2 := tw.LastIndex()
	err = errors.Join(err1, err2)
	if cerr := tw.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: open tidwall log: %w", err)
	}
	if fi != sc.first || li != sc.last {
		return fmt.Errorf("%w: tidwall sees seqs %d..%d, verification saw %d..%d",
			ErrCorrupt, fi, li, sc.first, sc.last)
	}
	return nil
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
	w.segs = l.segs
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
// entries go out in one write (batches beyond walWriteChunk bytes in a few)
// and one fdatasync. A batch that fills the tail segment is cut there (as
// tidwall cuts): that part is written and fdatasynced, the next segment is
// created and the rest goes there; the directory is fsynced before
// AppendBatch returns whenever it created a file. When it returns nil the
// entries are durable. A write or fsync error puts the WAL in the failed state: this
// and every later call return an error matching ErrFailed.
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
	// Segments are cut as tidwall cuts them: right after the entry that
	// brings one to SegmentSize. The tail is full before a batch only right
	// after Open.
	rotated := false
	if w.tail.full() {
		if err := w.rotate(next); err != nil {
			return err
		}
		rotated = true
	}
	end := entries[len(entries)-1].Seq
	for rest := entries; ; {
		n, err := w.tail.writeEntries(rest, end)
		if err != nil {
			return w.fail("write batch", err)
		}
		if !w.opts.NoSync {
			if err := w.syncFile(); err != nil {
				return w.fail("fsync segment", err)
			}
		}
		if rest = rest[n:]; len(rest) == 0 {
			break
		}
		// The batch filled the segment: its part there is durable (just
		// fsynced), so a crash can never leave a torn segment with a newer
		// file behind it. Go on in a new segment.
		if err := w.rotate(rest[0].Seq); err != nil {
			return err
		}
		rotated = true
	}
	if w.tail.full() {
		if err := w.rotate(end + 1); err != nil {
			return err
		}
		rotated = true
	}
	if rotated && !w.opts.NoSync {
		if err := w.syncDir(); err != nil {
			return w.fail("fsync WAL dir", err)
		}
	}
	w.last.Store(entries[len(entries)-1].Seq)
	return nil
}

// rotate starts the segment for seq first. The caller has made the current
// tail durable (every batch part is fdatasynced before a file is created
// behind it, and Open fsynced what it found) and fsyncs the directory.
func (w *WAL) rotate(first uint64) error {
	if err := w.tail.rotate(first); err != nil {
		return w.fail("create segment", err)
	}
	segs := make([]walSegment, len(w.segs), len(w.segs)+1)
	copy(segs, w.segs)
	w.segs = append(segs, walSegment{first, filepath.Join(w.dir, segmentName(first))})
	return nil
}

// Read returns a copy of the payload of seq, verified like Iterate does
// (including seq == index). It reads the segment holding seq sequentially
// up to the entry, so it costs up to one segment read: Read is for tests
// and tools, replay uses Iterate.
func (w *WAL) Read(seq uint64) ([]byte, error) {
	w.iterMu.RLock()
	defer w.iterMu.RUnlock()
	segs, first, last, err := w.snapshotSegments()
	if err != nil {
		return nil, err
	}
	if seq < first || seq > last {
		return nil, fmt.Errorf("%w: seq %d (WAL holds %d..%d)", ErrNotFound, seq, first, last)
	}
	return readSegmentEntry(segs, seq)
}

// snapshotSegments returns the segment files and the seq range they hold
// durably, consistently (under mu). The caller holds iterMu, so the files
// stay until it is done.
func (w *WAL) snapshotSegments() (segs []walSegment, first, last uint64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return nil, 0, 0, err
	}
	return w.segs, w.first.Load(), w.last.Load(), nil
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
	return w.IterateCursor(nil, from, fn)
}

// IterateCursor is Iterate that starts where cur stopped when cur is at
// from (a follower's consecutive calls: no re-scan of the segment up to
// from) and leaves cur at the entry after the last one visited (or at the
// one fn refused). A nil cur is Iterate.
func (w *WAL) IterateCursor(cur *WALCursor, from uint64, fn func(seq uint64, payload []byte) error) error {
	w.iterMu.RLock()
	defer w.iterMu.RUnlock()
	segs, first, last, err := w.snapshotSegments()
	if err != nil {
		return err
	}
	if from == 0 {
		from = first
	}
	if from < first || from > last+1 {
		return fmt.Errorf("%w: iterate from seq %d, WAL holds %d..%d", ErrOutOfRange, from, first, last)
	}
	if from > last {
		return nil
	}
	return iterateSegmentsCursor(segs, from, last, cur, fn)
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
// 100–260 ms with 64 MiB segments.) The last segment, which segWriter has
// open, is never deleted.
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
	segs := w.segs
	removed := 0
	var err error
	for ; removed+1 < len(segs) && segs[removed+1].index <= seq; removed++ {
		if err = os.Remove(segs[removed].path); err != nil {
			err = fmt.Errorf("journal: truncate front: %w", err)
			break
		}
	}
	if removed == 0 {
		return err
	}
	w.segs = append([]walSegment(nil), segs[removed:]...)
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
	// No fsync: every batch was fsynced before it was acknowledged (and a
	// failed WAL must never retry one). A healthy WAL cuts its tail's
	// preallocated zeros, so that at rest the directory is exactly
	// tidwall's format; not synced, as Open takes the tail either way.
	var terr error
	if w.failErr == nil {
		terr = w.tail.trim()
	}
	cerr := errors.Join(terr, w.tail.close())
	if w.failErr != nil {
		return w.failErr
	}
	if cerr != nil {
		return fmt.Errorf("journal: close: %w", cerr)
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
	if err := w.truncateSegment(t.Segment, t.Offset); err != nil {
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

// truncateSegment cuts the segment file at path to size bytes, durably.
func (w *WAL) truncateSegment(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil && !w.opts.NoSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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
