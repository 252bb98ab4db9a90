package core

// p2pStore holds every transfer, index i = transfer id i+1, in chunks of
// p2pChunk: adding one never copies the ones before it (a plain slice
// doubling at 1M transfers moved ~100 MB on the processor goroutine, and
// again on the read view's replica: ~1 µs per transfer amortised, and a
// stall of tens of ms at each doubling).
type p2pStore struct {
	chunks [][]P2PTransfer // each of cap p2pChunk; all full but the last
	n      int             // transfers held
}

// p2pChunk is the transfers per chunk (~100 B each).
const p2pChunk = 4096

func (s *p2pStore) len() int { return s.n }

// at returns transfer index i (0 <= i < len).
func (s *p2pStore) at(i int32) *P2PTransfer { return &s.chunks[i/p2pChunk][i%p2pChunk] }

// add appends t and returns its index.
func (s *p2pStore) add(t P2PTransfer) int32 {
	if s.n%p2pChunk == 0 {
		s.chunks = append(s.chunks, make([]P2PTransfer, 0, p2pChunk))
	}
	c := &s.chunks[len(s.chunks)-1]
	*c = append(*c, t)
	s.n++
	return int32(s.n - 1)
}
