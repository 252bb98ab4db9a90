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
		if m.bin != nil {
			if d := m.bin.totalsViolation(); d != 0 {
				p.fail(m.id, 0, d)
			}
		}
	}
}

func bookShapeOK(m *market) bool {
	// The best levels are the last ones: each side's slice is loaded once.
	b, a := m.bids.levels, m.asks.levels
	if len(b) > 0 {
		if l := &b[len(b)-1]; l.count <= 0 || l.qty <= 0 {
			return false
		}
	}
	if len(a) > 0 {
		if l := &a[len(a)-1]; l.count <= 0 || l.qty <= 0 {
			return false
		}
		if len(b) > 0 {
			return b[len(b)-1].price < a[len(a)-1].price
		}
	}
	return true
}

// checkScratch holds the full check's per-account accumulators, kept between
// checks so a check of a large state allocates nothing after the first.
type checkScratch struct {
	acct    []acctCheck         // per account: what its resting orders hold
	heldExt map[[2]uint64]Units // (account, asset) -> held, assets above inlineAssets
	fp      uint64              // sum of the resting orders' index fingerprints
}

// acctCheck is one account's accumulator: one cache line per account touched.
type acctCheck struct {
	held [inlineAssets]Units // frozen held by resting orders, assets 1..inlineAssets
	open int32               // resting orders found
}

func (sc *checkScratch) reset(accounts int) {
	if cap(sc.acct) < accounts {
		sc.acct = make([]acctCheck, accounts, accounts+accounts/4)
	}
	sc.acct = sc.acct[:accounts]
	clear(sc.acct)
	if sc.heldExt == nil {
		sc.heldExt = map[[2]uint64]Units{}
	}
	clear(sc.heldExt)
	sc.fp = 0
}

func (sc *checkScratch) hold(acct int32, asset AssetID, v Units) {
	a := &sc.acct[acct]
	a.open++
	if asset == 0 {
		return // a binary SELL's shares: checkBinary compares them with the position
	}
	if i := int(asset) - 1; uint(i) < inlineAssets {
		a.held[i] += v
		return
	}
	sc.heldExt[[2]uint64{uint64(acct), uint64(asset)}] += v
}

func (sc *checkScratch) heldOf(acct int32, asset AssetID) Units {
	if i := int(asset) - 1; uint(i) < inlineAssets {
		return sc.acct[acct].held[i]
	}
	return sc.heldExt[[2]uint64{uint64(acct), uint64(asset)}]
}

// indexFingerprint mixes an (order id, pool slot) pair into 64 bits
// (splitmix64's finalizer over both): summed over the books and over the
// order index, equal sums mean equal sets but for a 2^-64 chance.
func indexFingerprint(id uint64, slot int32) uint64 {
	x := id*0x9E3779B97F4A7C15 ^ (uint64(uint32(slot)) + 0x632BE59BD9B4E019)
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// fingerprint sums indexFingerprint over the map's entries, in table order.
func (m *idMap) fingerprint() uint64 {
	var sum uint64
	for i := range m.slots {
		if s := &m.slots[i]; s.v != 0 {
			sum += indexFingerprint(s.key, int32(s.v-1))
		}
	}
	return sum
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
	// The order index holds exactly the resting orders, each at its slot:
	// the same count, and the same sum of fingerprints of (id, slot) pairs
	// over the books (checkSide) as over the index, read in its own order
	// instead of one random lookup per order. A difference this misses has
	// a probability of 2^-64.
	if resting != p.orderIdx.len() || sc.fp != p.orderIdx.fingerprint() {
		out = append(out, viol(0, 0, ViolBookIndex)) // cross-market: the index is shared
	}
	p.p2pHeld(sc)
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
	if m.bin != nil {
		out = p.checkBinary(m, out)
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
		if acc.openOrders != sc.acct[ai].open {
			openBad = true
		}
		held := &sc.acct[ai].held
		for i := range acc.inl { // the inline assets, without a call per balance
			b := &acc.inl[i]
			s, ok1 := addUnits(sums[i+1], b.Avail)
			s, ok2 := addUnits(s, b.Frozen)
			sums[i+1] = s
			if b.Avail|b.Frozen < 0 {
				report(AssetID(i+1), ViolNegativeBalance)
			}
			if !ok1 || !ok2 {
				report(AssetID(i+1), ViolConservation)
			}
			if b.Frozen != held[i] {
				report(AssetID(i+1), ViolFrozenMismatch)
			}
		}
		for j, b := range p.balExt[ai] {
			p.checkBalance(sc, int32(ai), AssetID(j+inlineAssets+1), b, &sums, report)
		}
	}
	if openBad {
		out = append(out, viol(0, 0, ViolOpenOrders))
	}
	p.addBinaryPools(&sums) // reserves and pnl pools are quote held by the core
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

// checkLanes is how many levels' FIFOs checkSide walks at once. Following a
// FIFO is a chain of dependent loads, each usually a cache miss on a large
// book; the lanes' chains are independent, so the CPU overlaps their misses
// (measured with BenchmarkFullCheck: see docs/operations.md).
const checkLanes = 8

// checkLane is one FIFO being walked.
type checkLane struct {
	li    int   // level index
	oi    int32 // the next order to visit (-1: the FIFO ended)
	prev  int32 // the order visited before it
	qty   Units // remaining quantity summed so far
	count int32 // orders visited
	ok    bool
}

// checkSide verifies one book side: sorted distinct levels, each level's
// FIFO well linked (prev, head, tail) and, when aggregates, its count and
// quantity equal to its orders; every order resting where it should and
// holding at least what its remainder can cost. With sc it adds each
// order's frozen to the owner's held, counts open orders, and adds the
// order's index fingerprint; without it, it looks each order up in the
// index.
func (p *Processor) checkSide(m *market, s *bookSide, sc *checkScratch, aggregates bool) (int, bool) {
	ok := true
	for li := 1; li < len(s.levels); li++ {
		if !s.better(s.levels[li].price, s.levels[li-1].price) {
			ok = false
		}
	}
	maxRate := m.maxRate()
	var lanes [checkLanes]checkLane
	live, nextLevel, n := 0, 0, 0
	for ; live < checkLanes && nextLevel < len(s.levels); live++ {
		lanes[live] = checkLane{li: nextLevel, oi: s.levels[nextLevel].head, prev: -1, ok: true}
		nextLevel++
	}
	for live > 0 {
		for k := 0; k < live; {
			l := &lanes[k]
			if l.oi >= 0 && l.count <= MaxOrdersPerBook {
				p.checkOrder(m, s, l, sc, maxRate)
				k++
				continue
			}
			lv := &s.levels[l.li] // this FIFO ended (or never ends: a cycle)
			if !l.ok || l.oi >= 0 || lv.tail != l.prev || l.count == 0 ||
				(aggregates && (l.count != lv.count || l.qty != lv.qty)) {
				ok = false
			}
			n += int(l.count)
			if nextLevel < len(s.levels) {
				*l = checkLane{li: nextLevel, oi: s.levels[nextLevel].head, prev: -1, ok: true}
				nextLevel++
				k++
				continue
			}
			live--
			lanes[k] = lanes[live]
		}
	}
	return n, ok
}

// checkOrder visits the order lane l is at and moves l to the next one.
func (p *Processor) checkOrder(m *market, s *bookSide, l *checkLane, sc *checkScratch, maxRate Rate) {
	oi := l.oi
	o := &p.pool.slots[oi]
	if o.prev != l.prev || !o.inBook || o.price != s.levels[l.li].price || o.market != m.id ||
		o.remaining() <= 0 || int(o.acct) >= len(p.accounts) || (sc == nil && !p.indexedAt(o.id, oi)) {
		l.ok, l.oi = false, -1 // a broken FIFO: stop following it
		return
	}
	if !p.holdsEnough(m, o, maxRate) {
		l.ok = false
	}
	if !o.key.IsZero() && p.clientIdx[clientKey{o.user, o.key}] != o.id {
		l.ok = false
	}
	// The hot paths rely on these two: hasKey stands for key != 0 and the
	// owner's user id is its account's.
	if o.hasKey == o.key.IsZero() || p.accounts[o.acct].id != o.user {
		l.ok = false
	}
	if sc != nil && o.outcome != 0 {
		sc.hold(o.acct, m.binaryHeldAsset(o), o.frozen) // 0: shares, checked per position (checkBinary)
		sc.fp += indexFingerprint(uint64(o.id), oi)
	} else if sc != nil {
		sc.hold(o.acct, o.frozenAsset(m), o.frozen)
		sc.fp += indexFingerprint(uint64(o.id), oi)
	}
	var sumOK bool
	if l.qty, sumOK = addUnits(l.qty, o.remaining()); !sumOK {
		l.ok = false
	}
	l.count++
	l.prev, l.oi = oi, o.next
}

// holdsEnough reports whether resting order o holds at least what its
// remainder can still cost: its remaining base for a sell, notional plus the
// worst-case fee for a buy (frozenFor, without its error path).
func (p *Processor) holdsEnough(m *market, o *order, maxRate Rate) bool {
	if o.outcome != 0 {
		return m.binaryHoldsEnough(o, maxRate)
	}
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
