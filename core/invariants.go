package core

import "math/bits"

// Violation is one broken invariant found by the full check.
type Violation struct {
	Market MarketID      // 0 = balance level (halts the core)
	Asset  AssetID       // the asset of a balance-level violation
	Detail uint8         // Viol* constant
	Reason BreakerReason // the breaker reason it trips
}

func viol(m MarketID, asset AssetID, detail uint8) Violation {
	return Violation{Market: m, Asset: asset, Detail: detail, Reason: reasonOf(detail)}
}

// checkCheap runs the per-command checks: conservation of every asset whose
// balances moved (the running total must equal credited - debited) and the
// shape of the touched book (not crossed, best levels non-empty). A failure
// rolls the command back (rollback.go).
func (p *Processor) checkCheap() {
	for t := p.touchedAssets; t != 0; t &= t - 1 {
		asset := AssetID(bits.TrailingZeros64(t) + 1)
		st := &p.assets[asset]
		if st.total != st.credited-st.debited {
			p.fail(0, asset, ViolConservation)
		}
	}
	if m := p.marketOf(p.touchedMarket); m != nil && m.status != MarketHalted {
		if !bookShapeOK(m) {
			p.fail(m.id, 0, ViolCrossedBook)
		} else if deepChecks && !p.bookOK(m, true) {
			p.fail(m.id, 0, ViolBookIndex)
		}
	}
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

// checkScratch holds the full check's per-account accumulators, kept between
// checks so a check of a large state allocates nothing after the first.
type checkScratch struct {
	held    [][inlineAssets]Units // per account: frozen held by resting orders, assets 1..inlineAssets
	heldExt map[[2]uint64]Units   // (account, asset) -> held, assets above inlineAssets
	openPer []int32               // per account: resting orders found
}

func (sc *checkScratch) reset(accounts int) {
	if cap(sc.held) < accounts {
		sc.held = make([][inlineAssets]Units, accounts, accounts+accounts/4)
		sc.openPer = make([]int32, accounts, accounts+accounts/4)
	}
	sc.held, sc.openPer = sc.held[:accounts], sc.openPer[:accounts]
	clear(sc.held)
	clear(sc.openPer)
	if sc.heldExt == nil {
		sc.heldExt = map[[2]uint64]Units{}
	}
	clear(sc.heldExt)
}

func (sc *checkScratch) hold(acct int32, asset AssetID, v Units) {
	if i := int(asset) - 1; uint(i) < inlineAssets {
		sc.held[acct][i] += v
		return
	}
	sc.heldExt[[2]uint64{uint64(acct), uint64(asset)}] += v
}

func (sc *checkScratch) heldOf(acct int32, asset AssetID) Units {
	if i := int(asset) - 1; uint(i) < inlineAssets {
		return sc.held[acct][i]
	}
	return sc.heldExt[[2]uint64{uint64(acct), uint64(asset)}]
}

// CheckInvariants runs the full check over all state and returns every
// violation, in a deterministic order. It reads everything once (at 1M
// resting orders and 1M accounts, tens of milliseconds: see
// BenchmarkFullCheck), so the server runs it on a replica, never on the
// processor goroutine except for an operator's core resolution.
func (p *Processor) CheckInvariants() []Violation { return p.CheckInvariantsEach(nil) }

// CheckInvariantsEach is CheckInvariants calling after(id) once each
// market's own checks are done (recovery times them per market).
func (p *Processor) CheckInvariantsEach(after func(MarketID)) []Violation {
	sc := &p.chk
	sc.reset(len(p.accounts))
	var out []Violation
	resting := 0
	for id := MarketID(1); id <= MaxMarkets; id++ {
		m := p.markets[id]
		if m == nil {
			continue
		}
		var n int
		out, n = p.checkMarket(m, sc, out)
		resting += n
		if after != nil {
			after(id)
		}
	}
	if resting != p.orderIdx.len() {
		out = append(out, viol(0, 0, ViolBookIndex)) // an order indexed but in no book: cross-market
	}
	return p.checkBalances(sc, out)
}

// checkMarket appends the violations of one market's own invariants and
// returns how many orders rest in it, adding what they hold to sc. Spot
// books are the only kind today; a binary market adds its own checks here
// (shares symmetric, reserve, cost sum, oversold positions), each Violation
// carrying its own BreakerReason, and they trip its breaker the same way.
func (p *Processor) checkMarket(m *market, sc *checkScratch, out []Violation) ([]Violation, int) {
	n, ok := p.checkSide(m, &m.bids, sc, true)
	n2, ok2 := p.checkSide(m, &m.asks, sc, true)
	if !ok || !ok2 || int32(n+n2) != m.orders {
		out = append(out, viol(m.id, 0, ViolBookIndex))
	}
	if !bookShapeOK(m) {
		out = append(out, viol(m.id, 0, ViolCrossedBook))
	}
	return out, n + n2
}

// bookOK runs one market's book checks alone (no balances): with
// aggregates false it skips the level totals and counts and the market's
// order count, the part rebuildBook recomputes.
func (p *Processor) bookOK(m *market, aggregates bool) bool {
	n, ok := p.checkSide(m, &m.bids, nil, aggregates)
	n2, ok2 := p.checkSide(m, &m.asks, nil, aggregates)
	if !ok || !ok2 || (aggregates && int32(n+n2) != m.orders) {
		return false
	}
	if !aggregates {
		return true // a crossed best level is also judged after the rebuild, by the next command's checks
	}
	return bookShapeOK(m)
}

// checkBalances checks every account against what its orders hold and every
// asset's conservation.
func (p *Processor) checkBalances(sc *checkScratch, out []Violation) []Violation {
	var sums [MaxAssets + 1]Units
	var bad [MaxAssets + 1]uint16 // per asset: 1 << detail of the violations already reported
	report := func(asset AssetID, detail uint8) {
		if bad[asset]&(1<<detail) == 0 {
			bad[asset] |= 1 << detail
			out = append(out, viol(0, asset, detail))
		}
	}
	openBad := false
	for ai := range p.accounts {
		acc := &p.accounts[ai]
		if acc.openOrders != sc.openPer[ai] {
			openBad = true
		}
		for i, b := range acc.inl {
			p.checkBalance(sc, int32(ai), AssetID(i+1), b, &sums, report)
		}
		for j, b := range p.balExt[ai] {
			p.checkBalance(sc, int32(ai), AssetID(j+inlineAssets+1), b, &sums, report)
		}
	}
	if openBad {
		out = append(out, viol(0, 0, ViolOpenOrders))
	}
	for asset := AssetID(1); asset <= MaxAssets; asset++ {
		st := &p.assets[asset]
		if sums[asset] != st.credited-st.debited || st.total != sums[asset] {
			report(asset, ViolConservation)
		}
	}
	return out
}

func (p *Processor) checkBalance(sc *checkScratch, ai int32, asset AssetID, b Balance, sums *[MaxAssets + 1]Units,
	report func(AssetID, uint8)) {
	if b.Avail < 0 || b.Frozen < 0 {
		report(asset, ViolNegativeBalance)
	}
	s, ok1 := addUnits(sums[asset], b.Avail)
	s, ok2 := addUnits(s, b.Frozen)
	sums[asset] = s
	if !ok1 || !ok2 {
		report(asset, ViolConservation)
	}
	if b.Frozen != sc.heldOf(ai, asset) {
		report(asset, ViolFrozenMismatch)
	}
}

// checkSide verifies one book side: sorted distinct levels, each level's
// count and quantity equal to its linked orders (when aggregates), every
// order indexed and holding at least what its remainder can cost. With sc it
// adds each order's frozen to the owner's held and counts open orders.
func (p *Processor) checkSide(m *market, s *bookSide, sc *checkScratch, aggregates bool) (int, bool) {
	ok := true
	n := 0
	maxRate := m.maxRate()
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
			if !p.holdsEnough(m, o, maxRate) {
				ok = false
			}
			if !o.key.IsZero() && p.clientIdx[clientKey{o.user, o.key}] != o.id {
				ok = false
			}
			if sc != nil {
				sc.hold(o.acct, o.frozenAsset(m), o.frozen)
				sc.openPer[o.acct]++
			}
			var sumOK bool
			if qty, sumOK = addUnits(qty, o.remaining()); !sumOK {
				return n, false
			}
			count++
			prev = oi
		}
		if lv.tail != prev || count == 0 || (aggregates && (count != lv.count || qty != lv.qty)) {
			ok = false
		}
		n += int(count)
	}
	return n, ok
}

// holdsEnough reports whether resting order o holds at least what its
// remainder can still cost: its remaining base for a sell, notional plus the
// worst-case fee for a buy (frozenFor, without its error path).
func (p *Processor) holdsEnough(m *market, o *order, maxRate Rate) bool {
	if o.side == Sell {
		return o.frozen >= o.remaining()
	}
	n, ok := notional(o.price, o.remaining(), m.cfg.BaseScale)
	if ok {
		n, ok = withFee(n, maxRate)
	}
	return ok && o.frozen >= n
}

// UnhaltedViolations runs CheckInvariants and returns the violations that
// nothing has halted yet: a book-level violation in a market that is already
// HALTED, or a balance-level one while the core is halted, is a known,
// contained state awaiting an operator — recovery must reproduce it, not
// refuse to start because of it.
func (p *Processor) UnhaltedViolations() (open, contained []Violation) {
	return p.SplitViolations(p.CheckInvariants())
}

// SplitViolations splits vs into those nothing has halted yet (open) and
// those contained by a halt already in force.
func (p *Processor) SplitViolations(vs []Violation) (open, contained []Violation) {
	for _, v := range vs {
		m := p.marketOf(v.Market)
		if (v.Market == 0 && p.coreHalt != ReasonNone) || (m != nil && m.status == MarketHalted) {
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
