package core

// p2pStore holds every transfer, index i = transfer id i+1, in fixed-size
// chunks of p2pChunk: adding one never copies the ones before it (a plain
// slice doubling at 1M transfers moved ~100 MB on the processor goroutine,
// and again on the read view's replica: ~1 µs per transfer amortised, and
// a stall of tens of ms at each doubling).
type p2pStore struct {
	chunks []*[p2pChunk]P2PTransfer // all full but the last
	n      int                      // transfers held
}

// p2pChunk is the transfers per chunk (~100 B each), a power of two.
const (
	p2pChunkBits = 12
	p2pChunk     = 1 << p2pChunkBits
)

func (s *p2pStore) len() int { return s.n }

// at returns transfer index i (0 <= i < len).
func (s *p2pStore) at(i int32) *P2PTransfer {
	u := uint32(i)
	return &s.chunks[u>>p2pChunkBits][u&(p2pChunk-1)]
}

// add appends t and returns its index.
func (s *p2pStore) add(t P2PTransfer) int32 {
	if s.n%p2pChunk == 0 {
		s.chunks = append(s.chunks, new([p2pChunk]P2PTransfer))
	}
	s.chunks[len(s.chunks)-1][s.n%p2pChunk] = t
	s.n++
	return int32(s.n - 1)
}
