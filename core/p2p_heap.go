package core

// p2pHeap is the PENDING transfers as a binary min-heap of indices into
// p2pState.transfers, ordered by (ExecuteAt, ID); each transfer keeps its
// heap position (heapIdx) so a cancel removes it in O(log n). The order is
// total (ids are unique), so execution order is deterministic.
type p2pHeap []uint64

func (s *p2pState) less(a, b uint64) bool {
	ta, tb := s.transfers.at(a), s.transfers.at(b)
	if ta.ExecuteAt != tb.ExecuteAt {
		return ta.ExecuteAt < tb.ExecuteAt
	}
	return ta.ID < tb.ID
}

func (s *p2pState) swap(i, j int) {
	h := s.pending
	h[i], h[j] = h[j], h[i]
	s.transfers.at(h[i]).heapIdx = int32(i)
	s.transfers.at(h[j]).heapIdx = int32(j)
}

func (s *p2pState) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !s.less(s.pending[i], s.pending[parent]) {
			return
		}
		s.swap(i, parent)
		i = parent
	}
}

func (s *p2pState) down(i int) {
	n := len(s.pending)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.less(s.pending[r], s.pending[l]) {
			m = r
		}
		if !s.less(s.pending[m], s.pending[i]) {
			return
		}
		s.swap(i, m)
		i = m
	}
}

// push adds transfer id ti to the heap.
func (s *p2pState) push(ti uint64) {
	s.pending = append(s.pending, ti)
	s.transfers.at(ti).heapIdx = int32(len(s.pending) - 1)
	s.up(len(s.pending) - 1)
}

// remove takes transfer id ti out of the heap.
func (s *p2pState) remove(ti uint64) {
	i := int(s.transfers.at(ti).heapIdx)
	last := len(s.pending) - 1
	if i != last {
		s.swap(i, last)
	}
	s.pending = s.pending[:last]
	s.transfers.at(ti).heapIdx = -1
	if i != last {
		s.down(i)
		s.up(i)
	}
}
