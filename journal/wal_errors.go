package journal

import (
	"errors"
	"fmt"
)

// Errors returned by the WAL and the snapshot store. Match them with
// errors.Is; the concrete errors carry details (seq, segment, cause).
var (
	// ErrCorrupt: an entry or file failed verification somewhere other than
	// a repairable tail. Never skipped silently. See *CorruptError.
	ErrCorrupt = errors.New("journal: corrupt")
	// ErrTornTail: the last segment ends in a partial or damaged entry with
	// nothing valid after it (a crash during a write). Open repairs it;
	// OpenReadOnly reports it through (*WAL).TornTail.
	ErrTornTail = errors.New("journal: torn tail")
	// ErrFailed: a write or fsync failed earlier; the WAL refuses all
	// further work (a failed fsync is never retried). Sticky.
	ErrFailed = errors.New("journal: WAL failed")
	// ErrClosed: the WAL was closed.
	ErrClosed = errors.New("journal: WAL closed")
	// ErrReadOnly: a write was attempted on a WAL from OpenReadOnly.
	ErrReadOnly = errors.New("journal: WAL is read-only")
	// ErrOutOfOrder: AppendBatch seqs are not contiguous from LastSeq()+1.
	ErrOutOfOrder = errors.New("journal: seq out of order")
	// ErrPayloadTooLarge: a payload exceeds MaxPayloadSize.
	ErrPayloadTooLarge = errors.New("journal: payload too large")
	// ErrNotFound: Read of a seq outside [FirstSeq(), LastSeq()].
	ErrNotFound = errors.New("journal: seq not found")
	// ErrOutOfRange: Iterate or TruncateFront with a seq the WAL cannot
	// serve (for Iterate: entries before it were truncated or never existed).
	ErrOutOfRange = errors.New("journal: seq out of range")
	// ErrNoSnapshot: the snapshot store holds no valid snapshot.
	ErrNoSnapshot = errors.New("journal: no valid snapshot")
)

// CorruptError describes an entry that failed verification. It matches
// ErrTornTail when Torn is set and ErrCorrupt otherwise.
type CorruptError struct {
	Seq     uint64 // the seq the bad entry should carry (its WAL index)
	Segment string // path of the segment file
	Offset  int64  // byte offset of the entry's frame in the segment
	Bytes   int64  // torn tails only: bytes from Offset to the end of the file
	Reason  string
	// Torn: the bad bytes run to the end of the last segment and no valid
	// entry follows them, i.e. the residue of an interrupted write.
	Torn bool
}

func (e *CorruptError) Error() string {
	if e.Torn {
		return fmt.Sprintf("journal: torn tail at seq %d in segment %s (offset %d, %d bytes): %s",
			e.Seq, e.Segment, e.Offset, e.Bytes, e.Reason)
	}
	return fmt.Sprintf("journal: corrupt entry at seq %d in segment %s: %s (offset %d)",
		e.Seq, e.Segment, e.Reason, e.Offset)
}

// Is reports whether target is ErrTornTail (torn) or ErrCorrupt (not torn).
func (e *CorruptError) Is(target error) bool {
	if e.Torn {
		return target == ErrTornTail
	}
	return target == ErrCorrupt
}
