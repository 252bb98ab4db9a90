package ring

import "sync/atomic"

// CacheLinePad is the padding, in bytes, placed on each side of a hot
// atomic value. 128 bytes covers a 64-byte line plus the adjacent line that
// x86 spatial prefetchers pull in pairs (and the 128-byte lines of some ARM
// cores), so two Sequences never false-share.
const CacheLinePad = 128

// Sequence is a cache-line padded atomic int64 cursor. The zero value is 0,
// which means "nothing" (sequences start at 1). A Sequence must not be copied
// after first use.
type Sequence struct {
	_ [CacheLinePad]byte
	// v is the cursor value. Its owner (the single writer) is documented
	// where each Sequence is declared; everyone else only loads it.
	v atomic.Int64
	_ [CacheLinePad - 8]byte
}

// Load returns the current value.
func (s *Sequence) Load() int64 { return s.v.Load() }

// Store sets the value. Only the owner of the Sequence may call it.
func (s *Sequence) Store(v int64) { s.v.Store(v) }

// CompareAndSwap sets the value to new if it is old, reporting success.
func (s *Sequence) CompareAndSwap(old, new int64) bool { return s.v.CompareAndSwap(old, new) }

// minSeq returns the smallest value among seqs (seqs must not be empty).
func minSeq(seqs []*Sequence) int64 {
	m := seqs[0].Load()
	for _, s := range seqs[1:] {
		if v := s.Load(); v < m {
			m = v
		}
	}
	return m
}
