package journal

// WALCursor lets successive iterations over consecutive seqs (a Follower's)
// go on where the previous one stopped, instead of opening the segment and
// reading it again from its start each time, and reuses one small read
// buffer. The zero value is ready; a cursor that is not at the seq asked
// for is ignored (the segment is scanned from its start). Not safe for
// concurrent use.
type WALCursor struct {
	path string    // segment file holding the entry with seq next; "" = none
	seg  uint64    // that segment's first seq
	off  int64     // file offset of that entry's frame
	next uint64    // its seq
	r    segReader // read buffer of walCursorBufSize, reused
}

// walCursorBufSize is a WALCursor's read size: a follower close behind
// reads a few hundred KB per call, and the preallocated zeros after the
// newest entry are read at most this far. A follower catching up reads a
// full batch (~1.2 MB for 8192 http-benchmark commands) in ~19 reads
// instead of 2: noise next to that batch's Postgres write.
const walCursorBufSize = 64 << 10

// at reports whether c points at the entry with seq from in seg.
func (c *WALCursor) at(seg walSegment, from uint64) bool {
	return c != nil && c.path != "" && c.next == from && c.seg == seg.index && c.path == seg.path
}
