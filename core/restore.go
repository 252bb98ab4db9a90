package core

import (
	"errors"
	"slices"
)

// ErrSnapshot is returned by Restore for a snapshot that does not decode or
// whose structure is inconsistent (an order of an unknown account, a
// duplicate id, ...).
var ErrSnapshot = errors.New("core: invalid snapshot")

// Restore builds a processor from a serialization made by AppendSnapshot
// (version 5, or an older one: 4 from before the transfer retention, 3 from before binary market questions, 2
// from before binary markets and p2p, 1 from before the breaker). It
// rebuilds every index but checks no invariant: the state is restored exactly as it was stored,
// drifted aggregates included, and the caller decides what to do about its
// violations (journal.Recover checks it and falls back to an older base, or
// starts what is broken halted).
func Restore(cfg Config, b []byte) (*Processor, error) {
	p := New(cfg)
	p.accounts, p.balExt = p.accounts[:0], p.balExt[:0]
	p.userIdx.reset()
	r := rbuf{b: b}
	ver := r.u8()
	if ver < 1 || ver > SnapshotVersion {
		return nil, ErrSnapshot
	}
	p.lastSeq = Seq(r.uv())
	p.lastTime = r.sv()
	p.nextOrderID = OrderID(r.uv())
	p.nextTradeID = r.uv()
	if ver == 1 {
		if r.u8() == 1 {
			p.coreHalt, p.coreHaltSeq = ReasonInvariantBalance, p.lastSeq // v1 kept no reason
		}
	} else {
		p.coreHalt, p.coreHaltSeq = BreakerReason(r.u8()), Seq(r.uv())
		if p.coreHalt >= reasonCount {
			return nil, ErrSnapshot
		}
	}
	for n := r.uv(); n > 0 && r.err == nil; n-- {
		a := r.uv()
		if a == 0 || a > MaxAssets {
			return nil, ErrSnapshot
		}
		st := &p.assets[a]
		st.configured, st.scale = true, r.u8()
		if st.scale > MaxBaseScale {
			return nil, ErrSnapshot
		}
		st.credited, st.debited = Units(r.sv()), Units(r.sv())
		st.total = st.credited - st.debited
		if ver > 1 {
			st.total = Units(r.sv())
		}
	}
	// Accounts come after markets in the stream but orders need them; decode
	// markets into a staging list first.
	var ms []stagedMarket
	// The staging buffers' size hints share one budget: the orders the
	// snapshot's bytes could hold at all. A corrupt count in every market
	// then costs at most a small multiple of the input, never one buffer
	// that large per market.
	budget := uint64(len(r.b)) / minOrderBytes
	for n := r.uv(); n > 0 && r.err == nil; n-- {
		s := stagedMarket{m: p.readMarket(&r, ver)}
		if s.m == nil {
			return nil, ErrSnapshot
		}
		// A hint only (a wrong count just grows the slice), within budget.
		hint := min(uint64(max(s.m.orders, 0)), MaxOrdersPerBook, budget)
		budget -= hint
		s.orders = make([]order, 0, hint)
		for side := 0; side < 2 && r.err == nil; side++ {
			if !s.readSide(&r, ver, Side(side+1)) {
				return nil, ErrSnapshot
			}
		}
		if !s.readPositions(&r) {
			return nil, ErrSnapshot
		}
		ms = append(ms, s)
	}
	openOrders, err := p.readAccounts(&r, ver)
	if err != nil {
		return nil, err
	}
	orders := 0
	for i := range ms {
		orders += len(ms[i].orders)
	}
	p.pool.slots = slices.Grow(p.pool.slots, orders) // one allocation, not a doubling per power of two
	p.orderIdx.reserve(orders)
	for i := range ms {
		if err := p.placeStaged(&ms[i], ver); err != nil {
			return nil, err
		}
		if err := p.placePositions(&ms[i]); err != nil {
			return nil, err
		}
	}
	if ver > 1 {
		for i, n := range openOrders {
			p.accounts[i].openOrders = n
		}
	}
	if err := p.readOps(&r, ver); err != nil {
		return nil, err
	}
	if ver >= 3 {
		if err := p.readP2P(&r, ver); err != nil {
			return nil, err
		}
	}
	if r.err != nil || len(r.b) != 0 {
		return nil, ErrSnapshot
	}
	for i := range p.opLog {
		if k, r := p.opLog[i].k, p.opLog[i].r; k.kind == KindAdjust && r.code == OK {
			p.assets[r.asset].adjusted += r.amount
		}
	}
	if p.accountIdx(FeeUser) != feeAcct {
		return nil, ErrSnapshot
	}
	return p, nil
}

// stagedMarket is a decoded market waiting for the accounts its orders need.
type stagedMarket struct {
	m      *market
	levels [2][]level // per side, best first: the stored price, qty and count (version 2)
	lens   [2][]int   // per side and level: how many orders it has (version 2)
	// orders: both sides' orders, side 0 (bids) first, then side 1 from
	// split on; per side best level first, FIFO within a level. One buffer
	// sized from the market's stored count: growing a slice per side by
	// append copied each side's orders about four times over (at 1M orders
	// most of a restore's allocations, all garbage).
	orders []order
	split  int
	pos    []position // a binary market's positions, accounts not yet resolved (acct unset)
}

// readSide decodes one side of s.m.
func (s *stagedMarket) readSide(r *rbuf, ver uint8, side Side) bool {
	si := side - 1
	if ver == 1 {
		cnt := r.uv()
		if cnt > MaxOrdersPerBook || cnt > uint64(len(r.b)) {
			return false
		}
		for i := uint64(0); i < cnt && r.err == nil; i++ {
			s.orders = append(s.orders, readOrder(r, s.m, side))
		}
		s.sideEnd(si)
		return r.err == nil
	}
	nl := r.uv()
	if nl > MaxPriceLevels || nl > uint64(len(r.b)) {
		return false
	}
	for l := uint64(0); l < nl && r.err == nil; l++ {
		lv := level{price: Price(r.sv()), qty: Units(r.sv()), count: int32(r.sv()), head: -1, tail: -1}
		n := r.uv()
		if n > MaxOrdersPerBook || n > uint64(len(r.b)) {
			return false
		}
		s.levels[si] = append(s.levels[si], lv)
		s.lens[si] = append(s.lens[si], int(n))
		for i := uint64(0); i < n && r.err == nil; i++ {
			s.orders = append(s.orders, readOrder(r, s.m, side))
		}
	}
	s.sideEnd(si)
	return r.err == nil
}

// sideEnd marks the end of side si's orders in s.orders.
func (s *stagedMarket) sideEnd(si Side) {
	if si == 0 {
		s.split = len(s.orders)
	}
}

// side returns the staged orders of side si (0 bids, 1 asks).
func (s *stagedMarket) side(si int) []order {
	if si == 0 {
		return s.orders[:s.split]
	}
	return s.orders[s.split:]
}

// placeStaged links a staged market's orders into its book: version 1
// through insert (which recomputes every aggregate), version 2 exactly as
// stored (levels with their stored totals and counts, in the stored order).
func (p *Processor) placeStaged(s *stagedMarket, ver uint8) error {
	if p.markets[s.m.id] != nil {
		return ErrSnapshot
	}
	p.markets[s.m.id] = s.m
	for si := range 2 {
		if ver == 1 {
			for _, o := range s.side(si) {
				if err := p.restoreOrder(s.m, o, si, 0, true); err != nil {
					return err
				}
			}
			continue
		}
		side := s.m.side(Side(si + 1))
		side.levels = append(side.levels, s.levels[si]...) // best first while linking
		next := 0
		for li := range side.levels {
			for k := 0; k < s.lens[si][li]; k++ {
				if err := p.restoreOrder(s.m, s.side(si)[next], si, li, false); err != nil {
					return err
				}
				next++
			}
		}
		for i, j := 0, len(side.levels)-1; i < j; i, j = i+1, j-1 { // kept worst..best
			side.levels[i], side.levels[j] = side.levels[j], side.levels[i]
		}
	}
	return nil
}

// restoreOrder allocates o and links it: through insert (v1: aggregates
// recomputed), or at the tail of level li of side si as stored (levels still
// best first at this point), touching no aggregate.
func (p *Processor) restoreOrder(m *market, o order, si, li int, viaInsert bool) error {
	a := p.accountIdx(o.user)
	if a < 0 || o.remaining() <= 0 {
		return ErrSnapshot
	}
	if _, dup := p.orderIdx.get(uint64(o.id)); dup {
		return ErrSnapshot
	}
	if !o.key.IsZero() {
		if _, dup := p.clientIdx[clientKey{o.user, o.key}]; dup {
			return ErrSnapshot
		}
	}
	oi := p.pool.alloc()
	o.acct, o.prev, o.next = a, -1, -1
	p.pool.slots[oi] = o
	if viaInsert {
		p.insert(m, oi)
		return nil
	}
	s := &m.bids
	if si == 1 {
		s = &m.asks
	}
	lv := &s.levels[li]
	slot := &p.pool.slots[oi]
	slot.prev = lv.tail
	if lv.tail >= 0 {
		p.pool.slots[lv.tail].next = oi
	} else {
		lv.head = oi
	}
	lv.tail = oi
	slot.inBook = true
	p.orderIdx.put(uint64(o.id), oi)
	if !o.key.IsZero() {
		p.clientIdx[clientKey{o.user, o.key}] = o.id
	}
	return nil
}

func (p *Processor) readMarket(r *rbuf, ver uint8) *market {
	id := r.uv()
	if id == 0 || id > MaxMarkets {
		r.fail()
		return nil
	}
	m := &market{id: MarketID(id), bids: bookSide{bid: true}}
	if ver > 2 && !readBinaryHead(r, m, ver) {
		r.fail()
		return nil
	}
	c := &m.cfg
	c.Base, c.Quote, c.BaseScale = AssetID(r.uv()), AssetID(r.uv()), r.u8()
	c.Tick, c.Lot, c.MinQty, c.MaxQty = Price(r.sv()), Units(r.sv()), Units(r.sv()), Units(r.sv())
	c.MakerFee, c.TakerFee = Rate(r.sv()), Rate(r.sv())
	m.status = MarketStatus(r.u8())
	if ver > 1 {
		m.haltReason, m.haltSeq = BreakerReason(r.u8()), Seq(r.uv())
		m.orders = int32(r.sv())
	} else if m.status == MarketHalted {
		m.haltReason, m.haltSeq = ReasonManualHalt, 0 // v1 kept no reason
	}
	if r.err != nil || !p.validCfgOf(m) || !validStatus(m.status) || m.haltReason >= reasonCount ||
		(m.status == MarketHalted) != (m.haltReason != ReasonNone) {
		r.fail()
		return nil
	}
	return m
}

// minOrderBytes is a lower bound of one order's encoding (readOrder: ten
// fields of at least a byte each): it bounds a staging buffer's size hint
// by the bytes a snapshot has left.
const minOrderBytes = 10

func readOrder(r *rbuf, m *market, side Side) order {
	o := order{side: side, typ: Limit}
	if m != nil {
		o.market = m.id
	}
	o.id, o.user = OrderID(r.uv()), UserID(r.uv())
	o.tif, o.stp = TimeInForce(r.u8()), STP(r.u8())
	o.price, o.qty, o.filled, o.frozen = Price(r.sv()), Units(r.sv()), Units(r.sv()), Units(r.sv())
	o.key = r.key()
	o.hasKey = !o.key.IsZero()
	o.seq = Seq(r.uv())
	if m != nil && m.bin != nil {
		if o.outcome = Outcome(r.u8()); o.outcome != OutcomeYes && o.outcome != OutcomeNo {
			r.fail()
		}
	}
	if (o.tif != GTC && o.tif != PostOnly) || o.stp > STPExpireTaker || o.price <= 0 {
		r.fail()
	}
	return o
}

// readAccounts decodes the accounts; for version 2 it returns their stored
// open-order counts (applied once the orders are linked).
func (p *Processor) readAccounts(r *rbuf, ver uint8) ([]int32, error) {
	n := r.uv()
	if n > MaxUsers || n > uint64(len(r.b)) {
		return nil, ErrSnapshot
	}
	// Sized once (n is bounded by the bytes left above): appending grew
	// each by copying it several times over.
	open := make([]int32, 0, n)
	p.accounts = slices.Grow(p.accounts, int(n))
	p.balExt = slices.Grow(p.balExt, int(n))
	for ; n > 0 && r.err == nil; n-- {
		u := UserID(r.uv())
		if _, dup := p.userIdx.get(u); dup {
			return nil, ErrSnapshot
		}
		a := p.ensureAccount(u)
		st := AccountStatus(r.u8())
		if st > Disabled {
			return nil, ErrSnapshot
		}
		p.accounts[a].status = st
		if ver > 1 {
			open = append(open, int32(r.sv()))
		}
		for k := r.uv(); k > 0 && r.err == nil; k-- {
			asset := r.uv()
			if asset == 0 || asset > MaxAssets || !p.assets[asset].configured {
				return nil, ErrSnapshot
			}
			*p.balanceRef(a, AssetID(asset)) = Balance{Avail: Units(r.sv()), Frozen: Units(r.sv())}
		}
	}
	return open, r.err
}

func (p *Processor) readOps(r *rbuf, ver uint8) error {
	n := r.uv()
	if n > MaxProcessedOps+OpsReserve || n > uint64(len(r.b)) {
		return ErrSnapshot
	}
	for ; n > 0 && r.err == nil; n-- {
		k := opKey{kind: Kind(r.u8()), key: r.key()}
		rec := opRecord{user: UserID(r.uv()), asset: AssetID(r.uv()), amount: Units(r.sv()), code: Code(r.uv())}
		if ver > 1 {
			rec.flags = r.u8()
		}
		if k.kind < KindSpotDeposit || k.kind > KindAdjust || k.key.IsZero() || rec.code >= codeCount {
			return ErrSnapshot
		}
		if _, dup := p.ops[k]; dup {
			return ErrSnapshot
		}
		p.recordOp(k, rec)
	}
	return r.err
}
