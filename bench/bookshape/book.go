package bookshape

// Book is the yardstick of the processor's book-shape benchmark: a
// deliberately minimal price-time FIFO book — no accounts, balances, fees,
// events or checks, only what matching needs — written the way a fast Go
// book is (a flat order table indexed by the dense order id, sorted level
// slices with the best price last, intrusive FIFOs). Its matching rules are
// the core's (limit GTC/IOC, a modify that keeps priority only when it
// lowers the quantity at the same price, otherwise re-enters and may trade),
// so on the same messages it makes the same trades (core's
// TestBareBookMatchesProcessor). Not for production: it checks nothing.

// bareOrder is one order, at index id of Book.orders.
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

// Trade is one fill, as the core's EvTrade reports it.
type Trade struct {
	Maker, Taker uint32 // order ids
	Price, Qty   int64
}

// Book is the bare book (see the comment at the top of this file).
type Book struct {
	orders     []bareOrder // by order id (dense from 1)
	bids, asks bareSide
	Trades     int     // fills so far
	Rejects    int     // cancels and modifies of orders not resting
	Record     []Trade // every fill, when Recording
	Recording  bool
}

// NewBook returns an empty book for order ids 1..maxID.
func NewBook(maxID int) *Book {
	return &Book{orders: make([]bareOrder, maxID+1), bids: bareSide{bid: true}}
}

// Reset empties the book, keeping its tables.
func (b *Book) Reset() {
	clear(b.orders)
	b.bids.levels, b.asks.levels = b.bids.levels[:0], b.asks.levels[:0]
	b.Trades, b.Rejects, b.Record = 0, 0, b.Record[:0]
}

func (b *Book) side(s uint8) *bareSide {
	if s == Buy {
		return &b.bids
	}
	return &b.asks
}

func (b *Book) opposite(s uint8) *bareSide {
	if s == Buy {
		return &b.asks
	}
	return &b.bids
}

// Apply handles one message.
func (b *Book) Apply(m *Msg) {
	switch m.Kind {
	case New:
		o := &b.orders[m.ID]
		*o = bareOrder{price: m.Price, qty: int64(m.Qty), side: m.Side}
		b.match(m.ID, o)
		if !m.IOC && o.filled < o.qty {
			b.rest(m.ID, o)
		}
	case Cancel:
		o := &b.orders[m.ID]
		if !o.resting {
			b.Rejects++
			return
		}
		b.unlink(m.ID, o)
	case Modify:
		b.modify(m)
	}
}

func (b *Book) modify(m *Msg) {
	o := &b.orders[m.ID]
	qty := int64(m.Qty)
	if !o.resting || qty <= o.filled || (m.Price == o.price && qty == o.qty) {
		b.Rejects++
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
func (b *Book) match(tid uint32, t *bareOrder) {
	opp := b.opposite(t.side)
	for t.filled < t.qty && len(opp.levels) > 0 {
		li := len(opp.levels) - 1
		lv := &opp.levels[li]
		if (t.side == Buy && lv.price > t.price) || (t.side == Sell && lv.price < t.price) {
			return
		}
		for lv.head != 0 && t.filled < t.qty {
			mid := lv.head
			mk := &b.orders[mid]
			q := min(t.qty-t.filled, mk.qty-mk.filled)
			t.filled += q
			mk.filled += q
			b.Trades++
			if b.Recording {
				b.Record = append(b.Record, Trade{mid, tid, lv.price, q})
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
func (b *Book) rest(id uint32, o *bareOrder) {
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
func (b *Book) unlink(id uint32, o *bareOrder) {
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
