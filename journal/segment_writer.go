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

// Limits of the segment writer's batch buffer.
const (
	// walWriteChunk: a batch's frames are handed to the kernel in writes of
	// about this size (a batch of small entries is one write).
	walWriteChunk = 1 << 20
	// walWriteBufKeep: after a batch whose buffer grew beyond this (an
	// entry larger than walWriteChunk), the buffer is dropped rather than
	// kept for the life of the WAL.
	walWriteBufKeep = 4 << 20
)

// segWriter owns the tail segment file. It is used under WAL.mu only.
//
// Invariant: the tail file holds exactly size bytes, all of them whole
// frames, and every byte before the current batch has been written (and, in
// sync mode, fsynced) before the batch started; only the last segment is ever
// written, so only its tail can be torn by a crash.
type segWriter struct {
	dir   string
	limit int64    // Options.SegmentSize: the segment is cut after the batch that brings size to it
	f     *os.File // the tail segment (named by its first seq), opened for writing
	size  int64    // bytes in the tail segment
	buf   []byte   // frames not yet written; reused across batches
}

// openSegWriter opens the tail segment index for appending at offset size
// (the end of its last whole entry, as verified by the open scan).
func openSegWriter(dir string, limit int, index uint64, size int64) (*segWriter, error) {
	path := filepath.Join(dir, segmentName(index))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("journal: open tail segment: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: open tail segment: %w", err)
	}
	if fi.Size() != size {
		f.Close()
		return nil, fmt.Errorf("%w: tail segment %s holds %d bytes, verification saw %d (changed during open?)",
			ErrCorrupt, path, fi.Size(), size)
	}
	return &segWriter{dir: dir, limit: int64(limit), f: f, size: size}, nil
}

// full reports whether the tail has reached the segment size: a new segment
// must be started before the next entry. As with tidwall, a segment is cut
// right after the entry that brings it to the limit, inside a batch if need
// be, so a segment exceeds the limit by less than one entry.
func (s *segWriter) full() bool { return s.size >= s.limit }

// rotate closes the tail (whose bytes the caller has already made durable)
// and creates the empty segment file for seq first. The directory entry is
// durable only after the caller fsyncs the directory.
func (s *segWriter) rotate(first uint64) error {
	path := filepath.Join(s.dir, segmentName(first))
	// O_EXCL: no file can legitimately carry a seq above the last one.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	old := s.f
	s.f, s.size = f, 0
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
	return err
}

// close closes the tail file without syncing it.
func (s *segWriter) close() error { return s.f.Close() }
