package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// Truncating the back of the journal (issue 38): a fenced or restarted old
// primary discards its own unreplicated tail — its WAL entries past the
// replicated log's last seq, and the snapshots above it — before it
// rebuilds from what remains and follows the log as a standby.
//
// Crash safety. Every step leaves, on disk, a valid prefix of the WAL that
// Open accepts as is (or repairs the way it repairs any crash):
//
//  1. the segment files after the one that will hold the new tail are
//     deleted newest first, the directory fsynced after each: after any
//     crash the directory holds segments first..j, contiguous, the last of
//     them complete (a segment other than the tail was cut at its last
//     entry and holds no zeros), or the old tail with its preallocated
//     zeros (Open cuts them off);
//  2. that segment is cut right before the entry seq+1 and fsynced: a crash
//     before it leaves the segment whole (a longer prefix), one during it
//     either length (or a tail of zeros or a torn frame, which Open
//     repairs: it is the last segment);
//  3. the writer reopens it and preallocates it again (zeros after the
//     entries of the last segment: Open cuts them off).
//
// Never is a later segment left behind a cut one (a gap Open would refuse
// as corruption). A crash midway leaves a longer prefix than asked, never a
// shorter one; the caller (rejoin) compares the WAL with the log again
// after a restart and truncates again. TestWALTruncateBackCrashPoints runs
// Open after every prefix of the steps.
//
// Snapshots (DiscardAfter) go first: the WAL must reach the newest
// snapshot on disk (Open's MinLastSeq), so every snapshot above seq is
// removed, durably, before the WAL is cut below it.

// truncStep is one durable disk operation of TruncateBack: remove a file
// (and fsync the directory), or cut a file to size (and fsync it).
type truncStep struct {
	remove string
	cut    string
	size   int64
}

// apply performs the step durably (unless noSync).
func (s truncStep) apply(dir string, noSync bool) error {
	if s.remove != "" {
		if err := os.Remove(s.remove); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if noSync {
			return nil
		}
		return walFsyncDir(dir)
	}
	f, err := os.OpenFile(s.cut, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(s.size)
	if err == nil && !noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// truncateBackPlan returns the index of the segment that will be the tail
// after TruncateBack(seq) (the one entry seq+1 is in, or would be
// appended to) and the steps that get there. The caller holds mu.
func (w *WAL) truncateBackPlan(seq uint64) (int, []truncStep, error) {
	segs := w.segs
	k := len(segs) - 1
	for k > 0 && segs[k].index > seq+1 {
		k--
	}
	off, err := frameOffset(segs[k], seq+1)
	if err != nil {
		return 0, nil, err
	}
	var steps []truncStep
	for i := len(segs) - 1; i > k; i-- {
		steps = append(steps, truncStep{remove: segs[i].path})
	}
	return k, append(steps, truncStep{cut: segs[k].path, size: off}), nil
}

// frameOffset is the file offset of the frame of entry seq in seg (the
// end of its entries if seq is the one after its last), each entry before
// it checked to carry its seq.
func frameOffset(seg walSegment, seq uint64) (int64, error) {
	if seq == seg.index {
		return 0, nil
	}
	f, err := os.Open(seg.path)
	if err != nil {
		return 0, fmt.Errorf("journal: truncate back: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("journal: truncate back: %w", err)
	}
	var r segReader
	r.reset(f, fi.Size())
	for next := seg.index; ; next++ {
		data, st, reason, err := r.next()
		if err != nil {
			return 0, err
		}
		if next == seq && st != frameBad {
			return r.frameOff, nil // the entry's frame, or the end of the entries
		}
		if st != frameOK {
			return 0, &CorruptError{Seq: next, Segment: seg.path, Offset: r.frameOff,
				Reason: fmt.Sprintf("looking for seq %d to truncate after it: %s", seq, reason)}
		}
		if got, _, derr := DecodeEnvelope(data); derr != nil || got != next {
			return 0, &CorruptError{Seq: next, Segment: seg.path, Offset: r.frameOff,
				Reason: fmt.Sprintf("looking for seq %d to truncate after it: entry does not verify (seq %d, %v)", seq, got, derr)}
		}
	}
}

// TruncateBack drops every entry after seq, durably, while the WAL stays
// open: the segment files after the one holding seq+1's place are
// deleted, that one is cut right before entry seq+1, and the next
// AppendBatch starts at seq+1. seq may be from FirstSeq()-1 (drop every
// entry) up; a seq at or after LastSeq() is a no-op; one below
// FirstSeq()-1 is an ErrOutOfRange error and changes nothing. Crash safety:
// see the comment at the top of this file.
//
// Readers: it waits for running Iterate calls and holds new ones off
// while it works. A WALCursor past seq is stale (it points into entries
// that no longer exist): the followers that read past seq have applied
// discarded commands and are rebuilt by the caller, with new cursors.
//
// An I/O error midway fails the WAL (ErrFailed, sticky): what is on disk is
// still a valid prefix, which the next Open takes.
func (w *WAL) TruncateBack(seq uint64) error {
	w.iterMu.Lock()
	defer w.iterMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writable(); err != nil {
		return err
	}
	first, last := w.first.Load(), w.last.Load()
	if seq+1 < first {
		return fmt.Errorf("%w: truncate back to seq %d, the WAL starts at seq %d (the entries before it are gone)",
			ErrOutOfRange, seq, first)
	}
	if seq >= last {
		return nil
	}
	k, steps, err := w.truncateBackPlan(seq)
	if err != nil {
		return err // nothing changed
	}
	// The writer has the last segment open (and a spare in the making):
	// close it; it is reopened on the new tail.
	if err := w.tail.close(); err != nil {
		return w.fail("truncate back: close tail", err)
	}
	for _, st := range steps {
		if err := st.apply(w.dir, w.opts.NoSync); err != nil {
			return w.fail("truncate back", err)
		}
	}
	seg := w.segs[k]
	tail, perr, err := openSegWriter(w.dir, w.opts.SegmentSize, seg.index, steps[len(steps)-1].size, w.opts.NoSync)
	if perr != nil {
		w.log.Warn("journal: cannot preallocate the tail segment; appending to it (slower fsyncs)", "segment", seg.path, "err", perr)
	}
	if err != nil {
		return w.fail("truncate back: reopen tail", err)
	}
	tail.spares = newSpareMaker(w.dir, int64(w.opts.SegmentSize), w.opts.NoSync, w.log)
	w.tail = tail
	w.segs = append([]walSegment(nil), w.segs[:k+1]...)
	w.last.Store(seq)
	w.log.Warn("journal: WAL truncated back", "last_seq", seq, "dropped", last-seq, "dropped_from", seq+1,
		"segments_removed", len(steps)-1)
	return nil
}

// RemoveAbove deletes every snapshot above seq (newest first) and fsyncs
// the directory; it returns the seqs removed.
func (s *SnapshotStore) RemoveAbove(seq uint64) ([]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	infos, err := s.List()
	if err != nil {
		return nil, err
	}
	var removed []uint64
	for i := len(infos) - 1; i >= 0 && infos[i].Seq > seq; i-- {
		if err := os.Remove(infos[i].Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("journal: remove snapshot %d: %w", infos[i].Seq, err)
		}
		removed = append(removed, infos[i].Seq)
	}
	if len(removed) == 0 {
		return nil, nil
	}
	s.oldestKnown = false
	return removed, walFsyncDir(s.dir)
}

// ErrNoBase: DiscardAfter would leave no base to recover from: the WAL
// does not start at seq 1 and no valid snapshot at or below seq continues
// it. Nothing was changed; the node must bootstrap from a snapshot of
// another node instead.
var ErrNoBase = errors.New("journal: discarding the tail would leave no base to recover from")

// DiscardAfter discards a node's journal past seq: the snapshots above seq
// first, then the WAL's entries after seq (TruncateBack). It refuses
// (ErrNoBase, nothing changed) when what remains could not be recovered:
// the WAL has lost its front and no valid snapshot in [FirstSeq()-1, seq]
// remains; ErrOutOfRange (nothing changed) when seq < FirstSeq()-1.
func DiscardAfter(w *WAL, snaps *SnapshotStore, seq uint64, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	first := w.FirstSeq()
	if seq+1 < first {
		return fmt.Errorf("%w: discard after seq %d, the WAL starts at seq %d", ErrOutOfRange, seq, first)
	}
	if first > 1 {
		infos, err := snaps.List()
		if err != nil {
			return err
		}
		base := false
		for i := len(infos) - 1; i >= 0 && !base; i-- {
			if in := infos[i]; in.Seq <= seq && in.Seq+1 >= first {
				_, lerr := loadSnapshot(in.Path, in.Seq)
				base = lerr == nil
			}
		}
		if !base {
			return fmt.Errorf("%w: the WAL starts at seq %d and no valid snapshot lies in [%d, %d]",
				ErrNoBase, first, first-1, seq)
		}
	}
	removed, err := snaps.RemoveAbove(seq)
	if len(removed) > 0 {
		log.Warn("journal: snapshots above the discarded tail removed", "after_seq", seq, "removed", removed)
	}
	if err != nil {
		return err
	}
	return w.TruncateBack(seq)
}

// DiscardDirAfter is DiscardAfter on a data dir no process has open (the
// layout of Recover: WALDir and SnapshotDir under dir). It opens the WAL
// (repairing a torn tail as Open does) and closes it again.
func DiscardDirAfter(dir string, seq uint64, opts Options) error {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	snaps, err := OpenSnapshotStore(filepath.Join(dir, SnapshotDir), opts.Logger)
	if err != nil {
		return err
	}
	w, err := Open(filepath.Join(dir, WALDir), opts)
	if err != nil {
		return err
	}
	err = DiscardAfter(w, snaps, seq, opts.Logger)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}
