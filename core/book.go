package core

// level is one price level: a FIFO of orders linked through order.prev/next.
// Invariant: qty == sum of the remaining quantity of its orders, count == their number, count > 0.
type level struct {
	price Price
	qty   Units
	count int32
	head  int32
	tail  int32
}

// bookSide keeps levels sorted so the best price is LAST (pops are O(1)):
// bids ascending by price, asks descending.
type bookSide struct {
	bid    bool
	levels []level
}

// better reports whether price a has priority over b on this side.
func (s *bookSide) better(a, b Price) bool {
	if s.bid {
		return a > b
	}
	return a < b
}

// find returns the index where price is or would be inserted, and whether it exists.
func (s *bookSide) find(price Price) (int, bool) {
	// Levels are sorted worst..best: ascending for bids, descending for asks.
	// Search for the first level at or beyond price in that order. Orders
	// join and leave near the touch (on a public-benchmark-shaped flow
	// 84-88% of lookups end within the best eight levels), so the search
	// gallops down from the best level (n-1, n-2, n-4, n-8, ...) to bracket
	// the answer in O(log depth) before a binary search of the bracket.
	lv := s.levels
	n := len(lv)
	if n == 0 {
		return 0, false
	}
	hi := n - 1 // lv[hi] is at or beyond price once past this check
	if p := lv[hi].price; p == price {
		return hi, true
	} else if s.bid == (price > p) {
		return n, false // beyond the best: a new best level
	}
	lo := 0 // the answer is in [lo, hi]
	for step := 1; ; step <<= 1 {
		k := hi - step
		if k < 0 {
			break
		}
		if p := lv[k].price; p == price {
			return k, true
		} else if s.bid == (price > p) {
			lo = k + 1 // lv[k] is before price
			break
		}
		hi = k
	}
	// A lower-bound search of [lo, hi] without data-dependent branches (a
	// mispredicted one per halving cost more than the search): the answer
	// stays in [base, base+m].
	base := lo
	if s.bid {
		for m := hi - lo; m > 0; {
			half := (m + 1) >> 1
			base += half & -b2i(lv[base+half-1].price < price)
			m -= half
		}
	} else {
		for m := hi - lo; m > 0; {
			half := (m + 1) >> 1
			base += half & -b2i(lv[base+half-1].price > price)
			m -= half
		}
	}
	return base, lv[base].price == price
}

// best returns the index of the best level, or -1.
func (s *bookSide) best() int { return len(s.levels) - 1 }

// market is one order book plus its config. Owned by the processor goroutine.
type market struct {
	id         MarketID
	cfg        MarketCfg
	status     MarketStatus  // changed only along status.go's edges
	haltReason BreakerReason // why it is HALTED (ReasonNone otherwise)
	haltSeq    Seq           // the seq of the command that halted it
	bids       bookSide
	asks       bookSide
	orders     int32         // resting orders in both sides; <= MaxOrdersPerBook
	bin        *binaryMarket // nil: a spot market; else a binary YES/NO market (binary.go)
}

func (m *market) side(s Side) *bookSide {
	if s == Buy {
		return &m.bids
	}
	return &m.asks
}

func (m *market) opposite(s Side) *bookSide {
	if s == Buy {
		return &m.asks
	}
	return &m.bids
}

// insert links order oi at the tail of its price level, creating the level.
// The caller checked the level limit.
func (p *Processor) insert(m *market, oi int32) {
	o := &p.pool.slots[oi]
	s := m.side(o.side)
	i, ok, valid := s.at(p.levelHint-1, o.price)
	if !valid {
		i, ok = s.find(o.price)
	}
	p.levelHint = 0
	if !ok {
		s.levels = append(s.levels, level{})
		copy(s.levels[i+1:], s.levels[i:])
		s.levels[i] = level{price: o.price, head: -1, tail: -1}
	}
	lv := &s.levels[i]
	o.prev, o.next = lv.tail, -1
	if lv.tail >= 0 {
		p.pool.slots[lv.tail].next = oi
	} else {
		lv.head = oi
	}
	lv.tail = oi
	lv.count++
	lv.qty += o.remaining()
	o.inBook = true
	m.orders++
	p.accounts[o.acct].openOrders++
	p.orderIdx.put(uint64(o.id), oi)
	if o.hasKey {
		p.clientIdx[clientKey{o.user, o.key}] = o.id
	}
}

// unlink removes order oi from its level (deleting an empty level) and from
// the indexes. It does not touch balances or free the slot.
func (p *Processor) unlink(m *market, oi int32) {
	o := &p.pool.slots[oi]
	s := m.side(o.side)
	i, ok := s.find(o.price)
	if !ok {
		p.fail(m.id, 0, ViolBookIndex)
		return
	}
	lv := &s.levels[i]
	if o.prev >= 0 {
		p.pool.slots[o.prev].next = o.next
	} else {
		lv.head = o.next
	}
	if o.next >= 0 {
		p.pool.slots[o.next].prev = o.prev
	} else {
		lv.tail = o.prev
	}
	lv.count--
	lv.qty -= o.remaining()
	if lv.count == 0 {
		if lv.qty != 0 { // its total drifted from its orders: never drop that silently
			p.fail(m.id, 0, ViolLevelDrift)
		}
		s.levels = append(s.levels[:i], s.levels[i+1:]...)
	}
	o.inBook = false
	o.prev, o.next = -1, -1
	m.orders--
	p.accounts[o.acct].openOrders--
	p.orderIdx.del(uint64(o.id))
	if o.hasKey {
		delete(p.clientIdx, clientKey{o.user, o.key})
	}
}

// levelFor returns the level holding a resting order's price.
func (s *bookSide) levelFor(price Price) *level {
	if i, ok := s.find(price); ok {
		return &s.levels[i]
	}
	return nil
}

// at reports whether i is the answer find(price) would give, and if so
// whether the level at i has that price; it costs two comparisons. Levels
// are distinct and sorted, so only the true answer passes.
func (s *bookSide) at(i int, price Price) (idx int, found, valid bool) {
	lv := s.levels
	if i < 0 || i > len(lv) {
		return 0, false, false
	}
	if i < len(lv) {
		if lv[i].price == price {
			return i, true, true
		}
		if !s.better(lv[i].price, price) {
			return 0, false, false // lv[i] must be beyond price
		}
	}
	if i > 0 && !s.better(price, lv[i-1].price) {
		return 0, false, false // and lv[i-1] before it
	}
	return i, false, true
}

// canAdd checks that qty more may rest at price: a new level must fit under
// MaxPriceLevels and an existing level's total must not overflow. It leaves
// the level's index in p.levelHint for insert.
func (p *Processor) canAdd(s *bookSide, price Price, qty Units) Code {
	i, ok := s.find(price)
	p.levelHint = i + 1
	if !ok {
		if len(s.levels) >= MaxPriceLevels {
			return CodeTooManyPriceLevels
		}
		return OK
	}
	if _, ok := addUnits(s.levels[i].qty, qty); !ok {
		return CodeOverflow
	}
	return OK
}

// b2i is 1 for true and 0 for false (compiled to a SETcc, no branch).
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
