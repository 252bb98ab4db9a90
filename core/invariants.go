package core

import "math/bits"

// Violation is one broken invariant found by CheckInvariants.
type Violation struct {
	Market MarketID // 0 = balance level (halts the core)
	Asset  AssetID
	Detail uint8 // Viol* constant
}

// checkCheap runs the per-command checks: conservation of every asset whose
// balances moved (the running total must equal credited - debited) and the
// shape of the touched book (not crossed, best levels non-empty).
func (p *Processor) checkCheap() {
	for t := p.touchedAssets; t != 0; t &= t - 1 {
		asset := AssetID(bits.TrailingZeros64(t) + 1)
		st := &p.assets[asset]
		if st.total != st.credited-st.debited {
			p.violate(0, asset, ViolConservation)
		}
	}
	if m := p.marketOf(p.touchedMarket); m != nil && m.status != MarketHalted {
		if !bookShapeOK(m) {
			p.violate(m.id, 0, ViolCrossedBook)
		} else if deepChecks && !p.bookIndexOK(m) {
			p.violate(m.id, 0, ViolBookIndex)
		}
	}
}

// bookIndexOK verifies one book against its orders (deepChecks only).
func (p *Processor) bookIndexOK(m *market) bool {
	n, ok := p.checkSide(m, &m.bids, nil, nil)
	n2, ok2 := p.checkSide(m, &m.asks, nil, nil)
	return ok && ok2 && int32(n+n2) == m.orders
}

func bookShapeOK(m *market) bool {
	bb, ba := m.bids.best(), m.asks.best()
	if bb >= 0 && (m.bids.levels[bb].count <= 0 || m.bids.levels[bb].qty <= 0) {
		return false
	}
	if ba >= 0 && (m.asks.levels[ba].count <= 0 || m.asks.levels[ba].qty <= 0) {
		return false
	}
	return bb < 0 || ba < 0 || m.bids.levels[bb].price < m.asks.levels[ba].price
}

// CheckInvariants runs the full check over all state. It allocates and walks
// everything; the driver runs it on a sequenced tick and after recovery.
// Violations are reported in a deterministic order.
func (p *Processor) CheckInvariants() []Violation {
	var out []Violation
	var sums [MaxAssets + 1]Units
	held := make(map[[2]uint64]Units) // (account index, asset) -> frozen held by resting orders
	openPer := make([]int32, len(p.accounts))
	resting := 0
	for id := MarketID(1); id <= MaxMarkets; id++ {
		m := p.markets[id]
		if m == nil {
			continue
		}
		n, ok := p.checkSide(m, &m.bids, held, openPer)
		n2, ok2 := p.checkSide(m, &m.asks, held, openPer)
		resting += n + n2
		if !ok || !ok2 || int32(n+n2) != m.orders {
			out = append(out, Violation{Market: id, Detail: ViolBookIndex})
		}
		if !bookShapeOK(m) {
			out = append(out, Violation{Market: id, Detail: ViolCrossedBook})
		}
	}
	if resting != p.orderIdx.len() {
		out = append(out, Violation{Detail: ViolBookIndex, Market: firstMarket(p)})
	}
	for ai := range p.accounts {
		acc := &p.accounts[ai]
		if acc.openOrders != openPer[ai] {
			out = append(out, Violation{Detail: ViolOrderAccounting})
		}
		for asset := AssetID(0); asset < p.balanceSlots(int32(ai)); asset++ {
			b := p.balance(int32(ai), asset)
			if b.Avail < 0 || b.Frozen < 0 {
				out = append(out, Violation{Asset: AssetID(asset), Detail: ViolNegativeBalance})
			}
			var ok1, ok2 bool
			if sums[asset], ok1 = addUnits(sums[asset], b.Avail); ok1 {
				sums[asset], ok2 = addUnits(sums[asset], b.Frozen)
			}
			if !ok1 || !ok2 {
				out = append(out, Violation{Asset: AssetID(asset), Detail: ViolConservation})
			}
			if b.Frozen != held[[2]uint64{uint64(ai), uint64(asset)}] {
				out = append(out, Violation{Asset: AssetID(asset), Detail: ViolFrozenMismatch})
			}
		}
	}
	for asset := AssetID(1); asset <= MaxAssets; asset++ {
		st := &p.assets[asset]
		if sums[asset] != st.credited-st.debited || st.total != sums[asset] {
			out = append(out, Violation{Asset: asset, Detail: ViolConservation})
		}
	}
	return out
}

func firstMarket(p *Processor) MarketID {
	for id := MarketID(1); id <= MaxMarkets; id++ {
		if p.markets[id] != nil {
			return id
		}
	}
	return 0
}

// checkSide verifies one book side: sorted distinct levels, each level's
// count and quantity equal to its linked orders, every order indexed and
// holding at least what its remainder can cost. It adds each order's frozen
// to held and counts open orders per account (both skipped when nil).
func (p *Processor) checkSide(m *market, s *bookSide, held map[[2]uint64]Units, openPer []int32) (int, bool) {
	ok := true
	n := 0
	for li := range s.levels {
		lv := &s.levels[li]
		if li > 0 && !s.better(lv.price, s.levels[li-1].price) {
			ok = false
		}
		var qty Units
		var count int32
		prev := int32(-1)
		for oi := lv.head; oi >= 0; oi = p.pool.slots[oi].next {
			o := &p.pool.slots[oi]
			if o.prev != prev || !o.inBook || o.price != lv.price || o.market != m.id || !p.indexedAt(o.id, oi) ||
				o.remaining() <= 0 || int(o.acct) >= len(p.accounts) || count > MaxOrdersPerBook {
				return n, false
			}
			need, code := p.frozenFor(m, o.side, o.price, o.remaining())
			if code != OK || o.frozen < need {
				ok = false
			}
			if !o.key.IsZero() && p.clientIdx[clientKey{o.user, o.key}] != o.id {
				ok = false
			}
			if held != nil {
				held[[2]uint64{uint64(o.acct), uint64(o.frozenAsset(m))}] += o.frozen
				openPer[o.acct]++
			}
			var sumOK bool
			if qty, sumOK = addUnits(qty, o.remaining()); !sumOK {
				return n, false
			}
			count++
			prev = oi
		}
		if lv.tail != prev || count != lv.count || qty != lv.qty || count == 0 {
			ok = false
		}
		n += int(count)
	}
	return n, ok
}

// UnhaltedViolations runs CheckInvariants and returns the violations that
// nothing has halted yet: a book-level violation in a market that is already
// HALTED, or a balance-level one while the core is halted, is a known,
// contained state awaiting an operator — recovery must reproduce it, not
// refuse to start because of it.
func (p *Processor) UnhaltedViolations() (open, contained []Violation) {
	for _, v := range p.CheckInvariants() {
		m := p.marketOf(v.Market)
		if (v.Market == 0 && p.halted) || (m != nil && m.status == MarketHalted) {
			contained = append(contained, v)
		} else {
			open = append(open, v)
		}
	}
	return open, contained
}

// indexedAt reports whether the order index maps id to pool slot oi.
func (p *Processor) indexedAt(id OrderID, oi int32) bool {
	i, ok := p.orderIdx.get(uint64(id))
	return ok && i == oi
}
