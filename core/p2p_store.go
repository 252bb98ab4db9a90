package core

// p2pStore holds the transfers the core retains, by id, in fixed-size
// chunks of p2pChunk ids: adding one never copies the ones before it (a
// plain slice doubling at 1M transfers moved ~100 MB on the processor
// goroutine, and again on the read view's replica: ~1 µs per transfer
// amortised, and a stall of tens of ms at each doubling). A forgotten
// transfer (KindP2PForget) leaves a zero slot (Status 0); a chunk whose
// transfers are all forgotten is freed, and the leading freed chunks leave
// the slice, so memory follows what is retained, not what was ever made.
type p2pStore struct {
	chunks []*p2pChunkOf // chunk base+i; nil = every transfer in it forgotten
	base   uint64        // the chunk number of chunks[0]
	last   uint64        // the last id made (ids are 1, 2, ...; never reused)
	held   int           // transfers retained
}

type p2pChunkOf struct {
	t    [p2pChunk]P2PTransfer
	live int32 // transfers of the chunk retained
}

// p2pChunk is the transfers per chunk (~100 B each), a power of two.
const (
	p2pChunkBits = 12
	p2pChunk     = 1 << p2pChunkBits
)

// len is how many transfers the store retains.
func (s *p2pStore) len() int { return s.held }

// get returns transfer id, or nil when it was never made or is forgotten.
func (s *p2pStore) get(id uint64) *P2PTransfer {
	if id == 0 || id > s.last {
		return nil
	}
	c := (id - 1) >> p2pChunkBits
	if c < s.base || c-s.base >= uint64(len(s.chunks)) {
		return nil
	}
	ch := s.chunks[c-s.base]
	if ch == nil {
		return nil
	}
	t := &ch.t[(id-1)&(p2pChunk-1)]
	if t.Status == 0 {
		return nil
	}
	return t
}

// at returns transfer id, which the caller knows is retained.
func (s *p2pStore) at(id uint64) *P2PTransfer {
	c := (id - 1) >> p2pChunkBits
	return &s.chunks[c-s.base].t[(id-1)&(p2pChunk-1)]
}

// add stores t under id (> every id stored before) and returns its slot.
func (s *p2pStore) add(id uint64, t P2PTransfer) *P2PTransfer {
	c := (id - 1) >> p2pChunkBits
	if len(s.chunks) == 0 {
		s.base = c
	}
	for s.base+uint64(len(s.chunks)) <= c {
		s.chunks = append(s.chunks, nil)
	}
	ch := s.chunks[c-s.base]
	if ch == nil {
		if prev := len(s.chunks) - 2; prev >= 0 && s.chunks[prev] != nil && s.chunks[prev].live == 0 {
			s.chunks[prev] = nil // the chunk filled before, emptied while it was the last
		}
		ch = new(p2pChunkOf)
		s.chunks[c-s.base] = ch
	}
	slot := &ch.t[(id-1)&(p2pChunk-1)]
	*slot = t
	slot.ID = id
	ch.live++
	s.held++
	s.last = id
	return slot
}

// forget drops retained transfer id.
func (s *p2pStore) forget(id uint64) {
	c := (id - 1) >> p2pChunkBits
	ch := s.chunks[c-s.base]
	ch.t[(id-1)&(p2pChunk-1)] = P2PTransfer{}
	ch.live--
	s.held--
	if ch.live == 0 && (s.last-1)>>p2pChunkBits != c { // the chunk being filled stays
		s.chunks[c-s.base] = nil
	}
	n := 0
	for n < len(s.chunks) && s.chunks[n] == nil {
		n++
	}
	if n > 0 {
		s.chunks = append(s.chunks[:0:0], s.chunks[n:]...) // a fresh array: the freed head does not stay reachable
		s.base += uint64(n)
	}
}

// each calls f for every retained transfer in id order.
func (s *p2pStore) each(f func(t *P2PTransfer)) {
	for _, ch := range s.chunks {
		if ch == nil {
			continue
		}
		for i := range ch.t {
			if ch.t[i].Status != 0 {
				f(&ch.t[i])
			}
		}
	}
}
