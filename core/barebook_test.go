package core

// barebook_test.go is the yardstick of BenchmarkProcessorBookShape: a
// deliberately minimal price-time FIFO book — no accounts, balances, fees,
// events or checks, only what matching needs — written the way a fast Go
// book is (a flat order table indexed by the dense order id, sorted level
// slices with the best price last, intrusive FIFOs). Its matching rules are
// the processor's (limit GTC/IOC, a modify that keeps priority only when it
// lowers the quantity at the same price), so on the same messages it makes
// the same trades (TestBareBookMatchesProcessor).

import "github.com/ubscore/ubscore/bench/bookshape"

// bareOrder is one order, at index id of bareBook.orders.
type bareOrder struct {
	price      int64
	qty        int64 // total quantity
	filled     int64
	prev, next uint32 // neighbours in the level's FIFO (order ids), 0 = none
	side       uint8
	resting    bool
}

type bareLevel struct {
	price      int64
	head, tail uint32
}

// bareSide keeps its levels sorted worst..best (bids ascending, asks
// descending), so the best level is the last and popping it is O(1).
type bareSide struct {
	bid    bool
	levels []bareLevel
}

// bareTrade is one fill, as the processor's EvTrade reports it.
type bareTrade struct {
	maker, taker uint32
	price, qty   int64
}

type bareBook struct {
	orders     []bareOrder // by order id (dense from 1)
	bids, asks bareSide
	trades     int // fills
	rejects    int // cancels and modifies of orders not resting
	record     []bareTrade
	recording  bool
}

func newBareBook(maxID int) *bareBook {
	return &bareBook{orders: make([]bareOrder, maxID+1), bids: bareSide{bid: true}}
}

func (b *bareBook) reset() {
	clear(b.orders)
	b.bids.levels, b.asks.levels = b.bids.levels[:0], b.asks.levels[:0]
	b.trades, b.rejects, b.record = 0, 0, b.record[:0]
}

func (b *bareBook) side(s uint8) *bareSide {
	if s == bookshape.Buy {
		return &b.bids
	}
	return &b.asks
}

func (b *bareBook) opposite(s uint8) *bareSide {
	if s == bookshape.Buy {
		return &b.asks
	}
	return &b.bids
}

// apply handles one message.
func (b *bareBook) apply(m *bookshape.Msg) {
	switch m.Kind {
	case bookshape.New:
		o := &b.orders[m.ID]
		*o = bareOrder{price: m.Price, qty: int64(m.Qty), side: m.Side}
		b.match(m.ID, o)
		if !m.IOC && o.filled < o.qty {
			b.rest(m.ID, o)
		}
	case bookshape.Cancel:
		o := &b.orders[m.ID]
		if !o.resting {
			b.rejects++
			return
		}
		b.unlink(m.ID, o)
	case bookshape.Modify:
		b.modify(m)
	}
}

func (b *bareBook) modify(m *bookshape.Msg) {
	o := &b.orders[m.ID]
	qty := int64(m.Qty)
	if !o.resting || qty <= o.filled || (m.Price == o.price && qty == o.qty) {
		b.rejects++
		return
	}
	if m.Price == o.price && qty < o.qty {
		o.qty = qty // keeps its place
		return
	}
	b.unlink(m.ID, o)
	o.price, o.qty = m.Price, qty
	b.match(m.ID, o)
	if o.filled < o.qty {
		b.rest(m.ID, o)
	}
}

// match fills taker t against the opposite side while it crosses.
func (b *bareBook) match(tid uint32, t *bareOrder) {
	opp := b.opposite(t.side)
	for t.filled < t.qty && len(opp.levels) > 0 {
		li := len(opp.levels) - 1
		lv := &opp.levels[li]
		if (t.side == bookshape.Buy && lv.price > t.price) || (t.side == bookshape.Sell && lv.price < t.price) {
			return
		}
		for lv.head != 0 && t.filled < t.qty {
			mid := lv.head
			mk := &b.orders[mid]
			q := min(t.qty-t.filled, mk.qty-mk.filled)
			t.filled += q
			mk.filled += q
			b.trades++
			if b.recording {
				b.record = append(b.record, bareTrade{mid, tid, lv.price, q})
			}
			if mk.filled == mk.qty {
				mk.resting = false
				lv.head = mk.next
				if lv.head != 0 {
					b.orders[lv.head].prev = 0
				}
			}
		}
		if lv.head == 0 {
			opp.levels = opp.levels[:li]
		}
	}
}

// find returns the index of price's level in s, or where it would go.
func (s *bareSide) find(price int64) (int, bool) {
	lv := s.levels
	n := len(lv)
	if n > 0 && lv[n-1].price == price {
		return n - 1, true
	}
	lo, hi := 0, n
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if (s.bid && lv[h].price < price) || (!s.bid && lv[h].price > price) {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo, lo < n && lv[lo].price == price
}

// rest appends order id at the tail of its price level.
func (b *bareBook) rest(id uint32, o *bareOrder) {
	s := b.side(o.side)
	i, ok := s.find(o.price)
	if !ok {
		s.levels = append(s.levels, bareLevel{})
		copy(s.levels[i+1:], s.levels[i:])
		s.levels[i] = bareLevel{price: o.price}
	}
	lv := &s.levels[i]
	o.prev, o.next, o.resting = lv.tail, 0, true
	if lv.tail != 0 {
		b.orders[lv.tail].next = id
	} else {
		lv.head = id
	}
	lv.tail = id
}

// unlink takes resting order id off its level, dropping the level if empty.
func (b *bareBook) unlink(id uint32, o *bareOrder) {
	s := b.side(o.side)
	i, _ := s.find(o.price)
	lv := &s.levels[i]
	if o.prev != 0 {
		b.orders[o.prev].next = o.next
	} else {
		lv.head = o.next
	}
	if o.next != 0 {
		b.orders[o.next].prev = o.prev
	} else {
		lv.tail = o.prev
	}
	if lv.head == 0 {
		s.levels = append(s.levels[:i], s.levels[i+1:]...)
	}
	o.resting, o.prev, o.next = false, 0, 0
}
