package core

// binaryFill trades q shares at the maker's book price between taker ti and
// maker mi of binary market m (called by fill). The fill's kind follows
// from the two orders' (outcome, side); each party pays or receives its own
// outcome's price x q, its fee (maker or taker rate, floor) goes to the
// market's pnl pool, and cost sums move by exactly what each party paid or
// received, so reserve + pnlPool == sum of cost sums after every fill.
func (p *Processor) binaryFill(m *market, ti, mi int32, lv *level, q Units) {
	t, mk := &p.pool.slots[ti], &p.pool.slots[mi]
	b := m.bin
	bp := lv.price
	cfg := &m.cfg
	kind := fillKind(t, mk)
	tn, tf, tok := binaryLeg(b, t, bp, q, cfg.TakerFee)
	mn, mf, mok := binaryLeg(b, mk, bp, q, cfg.MakerFee)
	if !tok || !mok {
		p.fail(m.id, 0, ViolOrderAccounting)
		return
	}
	t.filled += q
	mk.filled += q
	lv.qty -= q
	t.lastPx = bp
	tid := p.nextTradeID
	p.nextTradeID++
	e := p.newEvent(EvTrade)
	e.Market, e.TradeID, e.Price, e.Qty, e.Amount = m.id, tid, bp, q, Units(bp)*q
	e.OrderID, e.OtherOrderID, e.User, e.OtherUser = mk.id, t.id, mk.user, t.user
	e.Fee, e.Fee2, e.Side, e.Flags, e.Detail = mf, tf, t.userSide(), uint8(kind), uint8(t.outcome)
	e.Payout = b.payout
	p.binaryLegApply(m, t, q, tn, tf)
	p.binaryLegApply(m, mk, q, mn, mf)
	var dReserve Units
	switch kind {
	case FillMint:
		dReserve = b.payout * q
		b.yesShares += q
		b.noShares += q
	case FillBurn:
		dReserve = -b.payout * q
		b.yesShares -= q
		b.noShares -= q
	}
	b.reserve += dReserve
	b.pnlPool += tf + mf
	st := &p.assets[cfg.Quote]
	st.total += dReserve + tf + mf // the money the legs moved out of (or into) accounts
	b.costSum += p.legCost(t, tn, tf) + p.legCost(mk, mn, mf)
	if mk.remaining() == 0 {
		e := p.newEvent(EvOrderFilled)
		e.Market, e.User, e.OrderID, e.OtherOrderID = m.id, mk.user, mk.id, t.id
		e.Price, e.Qty, e.Side, e.Status, e.Detail = bp, q, mk.side, StatusFilled, uint8(mk.outcome)
		e.Payout = b.payout
		p.closeOrder(m, mi)
	} else {
		e := p.newEvent(EvOrderPartiallyFilled)
		e.Market, e.User, e.OrderID, e.OtherOrderID = m.id, mk.user, mk.id, t.id
		e.Price, e.Qty, e.Amount, e.Side, e.Status, e.Detail = bp, q, mk.remaining(), mk.side, StatusPartiallyFilled,
			uint8(mk.outcome)
		e.Payout, e.Frozen = b.payout, mk.frozen
	}
}

// fillKind classifies a fill by the two orders' (outcome, own side).
func fillKind(t, mk *order) FillKind {
	if t.outcome == mk.outcome {
		if t.outcome == OutcomeYes {
			return FillTransferYes
		}
		return FillTransferNo
	}
	if t.userSide() == Buy {
		return FillMint // opposite outcomes, both buying
	}
	return FillBurn
}

// binaryLeg is one party's notional (its own outcome's price x q) and fee.
func binaryLeg(b *binaryMarket, o *order, bookPrice Price, q Units, rate Rate) (Units, Units, bool) {
	n, ok := binNotional(b.ownPrice(o.outcome, bookPrice), q)
	return n, binFee(n, rate), ok
}

// legCost is how much a leg moves its owner's cost sum: + paid on a buy,
// − received (net of fee) on a sell.
func (p *Processor) legCost(o *order, n, fee Units) Units {
	if o.userSide() == Buy {
		return n + fee
	}
	return -(n - fee)
}

// binaryLegApply settles one party of a fill: a buyer's held quote pays
// n + fee and it gains q shares; a seller's held shares go and it receives
// n − fee. The position's cost sum moves by the same amount.
func (p *Processor) binaryLegApply(m *market, o *order, q, n, fee Units) {
	if o.pos < 0 {
		o.pos = p.ensurePosition(m.bin, o.acct) // a BUY's first fill creates its owner's position
	}
	ps := &m.bin.pos[o.pos]
	if o.userSide() == Buy {
		spend := n + fee
		if o.frozen < spend {
			p.fail(m.id, 0, ViolOrderAccounting)
		}
		o.frozen -= spend
		p.move(o.acct, m.cfg.Quote, 0, -spend)
		*ps.vol(o.outcome) += q
		*ps.cost(o.outcome) += spend
		p.emitPosition(m, ps)
		return
	}
	if o.frozen < q {
		p.fail(m.id, 0, ViolOrderAccounting)
	}
	o.frozen -= q
	v, pend := ps.vol(o.outcome), ps.pending(o.outcome)
	*v -= q
	*pend -= q
	if *pend < 0 || *v < *pend {
		p.fail(m.id, 0, ViolOversold)
	}
	p.move(o.acct, m.cfg.Quote, n-fee, 0)
	*ps.cost(o.outcome) -= n - fee
	p.emitPosition(m, ps)
}

// trimHold releases what a BUY taker holds beyond what its remainder can
// still cost at its own limit, once its matching ends: the price it got
// below its limit, and the fee difference when the taker rate is below the
// worst-case rate held. One release per command, before the remainder
// rests or expires (a taker filled whole releases everything when it
// closes). A resting order keeps what it froze until it closes, as on spot.
func (p *Processor) trimHold(m *market, o *order) {
	if o.userSide() != Buy {
		return
	}
	need, ok := binaryHold(m.bin.ownPrice(o.outcome, o.price), o.remaining(), m.maxRate())
	if !ok {
		p.fail(m.id, 0, ViolOrderAccounting)
		return
	}
	if rel := o.frozen - need; rel > 0 {
		o.frozen = need
		p.move(o.acct, m.cfg.Quote, rel, -rel)
	}
}

// releaseBinary returns what a closing binary order still holds: quote to
// the owner's available balance, shares to the position's free part.
func (p *Processor) releaseBinary(m *market, o *order, rel Units) {
	if o.userSide() == Buy {
		p.move(o.acct, m.cfg.Quote, rel, -rel)
		return
	}
	ps := &m.bin.pos[o.pos]
	pend := ps.pending(o.outcome)
	*pend -= rel
	if *pend < 0 {
		p.fail(m.id, 0, ViolOversold)
	}
	p.emitPosition(m, ps)
}
