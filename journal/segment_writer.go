package journal

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// This file appends to the WAL. It writes tidwall/wal's binary segment
// format itself (see the package doc) with a plain append-only file: tidwall's
// writer keeps the whole tail segment in one in-memory buffer that grows by
// reallocation and copying, and on this VM the page faults on that fresh
// memory cost 2–13 ms per batch as the segment fills. Here the only memory is
// one reusable batch buffer, so nothing grows with the segment. tidwall's
// writer also fsyncs at every segment switch on its own and allocates a
// fresh segment buffer and entry-position slice per segment: measured with
// `GODEBUG=gctrace=1 bench pipeline --commands 1500000 --rate 500000
// --batch 16`, 39 GC cycles with tidwall writing against 6 with segWriter,
// each cycle taking most of one of this machine's two cores for 1.5–5 ms.
// tidwall/wal stays the definition of the format and opens every WAL at
// start-up as a cross-check (crossCheckTidwall).
//
// Preallocation. The tail segment is written in place over zeros that were
// written and fdatasynced before it became the tail (the next one is made
// off the journaler's path by spareMaker), as PostgreSQL does with its WAL
// segments. Appending grows the file, and on ext4 every fdatasync of an
// append must commit the new size and block mapping through the file
// system's journal (and convert unwritten extents in a kworker); an
// overwrite of blocks already on disk only writes the data. Measured with
// `bench http --conns 256` on this 2-core VM, Postgres on the same disk
// (perf trace of fdatasync in the exchange): appending, mean 1.0 ms, p50
// 384 us, p90 2.7 ms; preallocated, p50 127 us (~75 us when the journaler
// commits back to back), and POST /order went from 0.41–0.46 to 0.47–0.52
// of the hello-world baseline.
//
// What an overwrite's fdatasync still costs where the file system has no
// journal (this VM's ext4: /sys/fs/ext4/vda/journal_task is <none>): a
// write that moves the file's ctime (once per tick of the coarse clock)
// also bumps i_version and marks the inode dirty for sync, and the
// journal-less fsync path writes the inode's table block before the cache
// flush: three serial I/Os (data, inode, flush) instead of two. Measured
// under `bench http --conns 256` with the block and sched tracepoints (perf
// record -e block:block_rq_issue,syscalls:sys_enter_fdatasync,...): the
// exchange issued a 4 KiB WSM write to one fixed sector for ~60% of its
// fdatasyncs, which took p50 0.6–0.9 ms, mean 1.1–1.6 ms with the CPUs
// saturated (the waking thread waits for a CPU: wakeup-to-run p90 ~1 ms).
// Nothing here avoids it: O_DIRECT and mmap writes move ctime too, and
// mounting with lazytime does not help (the i_version bump forces the
// inode write). Raising the sync thread to SCHED_FIFO around the syscall
// cut the fdatasync to p50 430 us, mean 640 us, but the exchange's rate
// did not rise (smaller group commits cost more CPU per order: 3
// interleaved pairs, 0.45–0.47 vs 0.48–0.52 of the baseline), so the
// thread keeps its normal priority.
//
// The zeros after the last entry end the segment for every reader
// (segReader: a zero length prefix followed only by zeros to the end of
// the file). They exist only in the last segment: a segment is
// preallocated to the segment size and cut only once its entries reach it.
// Close cuts the tail's zeros off, and Open does so after a crash before
// tidwall's cross-check (preallocating again after it), so at rest every
// segment but the one being written is exactly tidwall's format; the open
// scan refuses zeros after the entries of any other segment.

// Limits of the segment writer's batch buffer.
const (
	// walWriteChunk: a batch's frames are handed to the kernel in writes of
	// about this size (a batch of small entries is one write).
	walWriteChunk = 1 << 20
	// walWriteBufKeep: after a batch whose buffer grew beyond this (an
	// entry larger than walWriteChunk), the buffer is dropped rather than
	// kept for the life of the WAL.
	walWriteBufKeep = 4 << 20
	// zeroChunk: preallocation writes zeros in writes of this size.
	zeroChunk = 256 << 10
)

// zeros is read-only: the source of every preallocation write.
var zeros = make([]byte, zeroChunk)

// segWriter owns the tail segment file. It is used under WAL.mu only.
//
// Invariant: the tail file holds exactly size bytes, all of them whole
// frames, and every byte before the current batch has been written (and, in
// sync mode, fsynced) before the batch started; only the last segment is ever
// written, so only its tail can be torn by a crash.
//
// Invariant: alloc >= size, and the file's bytes [size, alloc) are zeros
// (preallocated space, fdatasynced unless noSync); once size passes alloc,
// writes append.
type segWriter struct {
	dir    string
	limit  int64    // Options.SegmentSize: the segment is cut after the batch that brings size to it
	f      *os.File // the tail segment (named by its first seq), opened for writing
	size   int64    // bytes of whole frames in the tail segment: where the next frame goes
	alloc  int64    // bytes the tail file holds: size plus the zeros preallocated after it
	buf    []byte   // frames not yet written; reused across batches
	noSync bool
	spares *spareMaker // prepares the next segment file; nil: rotate creates empty files
}

// openSegWriter opens the tail segment index for writing at offset size
// (the end of its last whole entry, as verified by the open scan; the file
// holds nothing after it) and preallocates it up to the segment size. If
// the preallocation fails (a full disk), the zeros are cut off again and
// the writer appends; the reason is returned in preallocErr for a warning
// (a disk too full for a segment of zeros fails the next appends soon
// enough; refusing to open over it would also refuse a read-only replay).
func openSegWriter(dir string, limit int, index uint64, size int64, noSync bool) (s *segWriter, preallocErr, err error) {
	path := filepath.Join(dir, segmentName(index))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: open tail segment: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("journal: open tail segment: %w", err)
	}
	if fi.Size() != size {
		f.Close()
		return nil, nil, fmt.Errorf("%w: tail segment %s holds %d bytes, verification saw %d (changed during open?)",
			ErrCorrupt, path, fi.Size(), size)
	}
	s = &segWriter{dir: dir, limit: int64(limit), f: f, size: size, alloc: size, noSync: noSync}
	if size < s.limit {
		if perr := zeroFill(f, size, s.limit, noSync); perr != nil {
			if err := f.Truncate(size); err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("journal: preallocate tail segment: %w; cutting it back: %w", perr, err)
			}
			return s, perr, nil
		}
		s.alloc = s.limit
	}
	return s, nil, nil
}

// full reports whether the tail has reached the segment size: a new segment
// must be started before the next entry. As with tidwall, a segment is cut
// right after the entry that brings it to the limit, inside a batch if need
// be, so a segment exceeds the limit by less than one entry.
func (s *segWriter) full() bool { return s.size >= s.limit }

// rotate closes the tail (whose bytes the caller has already made durable)
// and creates the segment file for seq first: the spare spareMaker
// prepared (already zero-filled), or, if none is ready, an empty file the
// writer appends to. The closed tail holds no zeros: it is cut only once
// its entries reach the limit, which is as far as it was preallocated. The
// directory entry is durable only after the caller fsyncs the directory.
func (s *segWriter) rotate(first uint64) error {
	path := filepath.Join(s.dir, segmentName(first))
	f, alloc, err := s.spares.take(path)
	if err != nil {
		return err
	}
	old := s.f
	s.f, s.size, s.alloc = f, 0, alloc
	return old.Close()
}

// writeEntries appends the frames of a prefix of entries (a uvarint
// length, then the envelope; lastOfBatch marks the batch end on the last
// entry of the batch) to the tail file: up to the entry that fills the
// segment, or all of them. It returns how many it wrote. On error the file
// may hold part of them; the caller fails the WAL.
func (s *segWriter) writeEntries(entries []Entry, lastOfBatch uint64) (int, error) {
	buf := s.buf[:0]
	n := 0
	for n < len(entries) {
		if len(buf) >= walWriteChunk {
			if err := s.write(buf); err != nil {
				return n, err
			}
			buf = buf[:0]
		}
		e := &entries[n]
		buf = binary.AppendUvarint(buf, uint64(EnvelopeSize(len(e.Payload))))
		buf = appendEnvelope(buf, e.Seq, e.Payload, e.Seq == lastOfBatch)
		n++
		if s.size+int64(len(buf)) >= s.limit {
			break
		}
	}
	err := s.write(buf)
	if cap(buf) <= walWriteBufKeep {
		s.buf = buf[:0]
	} else {
		s.buf = nil
	}
	return n, err
}

func (s *segWriter) write(b []byte) error {
	n, err := s.f.WriteAt(b, s.size)
	s.size += int64(n)
	s.alloc = max(s.alloc, s.size)
	return err
}

// trim cuts the tail's preallocated zeros off, without syncing.
func (s *segWriter) trim() error {
	if s.alloc == s.size {
		return nil
	}
	if err := s.f.Truncate(s.size); err != nil {
		return err
	}
	s.alloc = s.size
	return nil
}

// close closes the tail file without syncing it (its zeros stay: Open
// drops them) and stops the spare maker, removing its spare.
func (s *segWriter) close() error {
	err := s.f.Close()
	s.spares.stop()
	return err
}

// zeroFill writes zeros over [from, to) of f and, unless noSync,
// fdatasyncs it.
func zeroFill(f *os.File, from, to int64, noSync bool) error {
	for off := from; off < to; {
		n, err := f.WriteAt(zeros[:min(int64(len(zeros)), to-off)], off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	if noSync {
		return nil
	}
	return Fdatasync(f)
}
