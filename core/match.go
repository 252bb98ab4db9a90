package core

// simulate walks the opposite side exactly as match would for a taker of
// user on side (limit 0 = market), without mutating: own orders are skipped
// (STP cancel-resting) or end the walk (STP expire-taker). It returns the base
// quantity fillable up to maxQty and, for buys, its quote cost including the
// taker fee, computed per fill as match computes it.
func (p *Processor) simulate(m *market, user UserID, side Side, limit Price, maxQty Units, stp STP) (Units, Units, bool) {
	opp := m.opposite(side)
	var qty, cost Units
	for li := len(opp.levels) - 1; li >= 0 && qty < maxQty; li-- {
		lv := &opp.levels[li]
		if limit != 0 && !crosses(side, limit, lv.price) {
			break
		}
		for oi := lv.head; oi >= 0 && qty < maxQty; oi = p.pool.slots[oi].next {
			o := &p.pool.slots[oi]
			if o.user == user {
				if stp == STPExpireTaker {
					return qty, cost, true
				}
				continue
			}
			q := min(maxQty-qty, o.remaining())
			qty += q
			if side == Buy {
				n, ok := notional(lv.price, q, m.cfg.BaseScale)
				if !ok {
					return qty, cost, false
				}
				if n, ok = withFee(n, m.cfg.TakerFee); !ok {
					return qty, cost, false
				}
				if cost, ok = addUnits(cost, n); !ok {
					return qty, cost, false
				}
			}
		}
	}
	return qty, cost, true
}

// match executes taker order ti against the opposite side of m. It reports
// whether matching stopped at an own resting order under STPExpireTaker, in
// which case the remainder must expire rather than rest (it would cross).
func (p *Processor) match(m *market, ti int32) (stpStopped bool) {
	t := &p.pool.slots[ti]
	opp := m.opposite(t.side)
	byQuote := t.byQuote
	for t.remaining() > 0 {
		bi := opp.best()
		if bi < 0 {
			return false
		}
		lv := &opp.levels[bi]
		if t.typ == Limit && !crosses(t.side, t.price, lv.price) {
			return false
		}
		mi := lv.head
		mk := &p.pool.slots[mi]
		if mk.acct == t.acct { // the same user (one account per user)
			if t.stp == STPExpireTaker {
				return true
			}
			p.cancelResting(m, mi, CodeSelfTradePrevented)
			continue
		}
		q := min(t.remaining(), mk.remaining())
		if byQuote {
			q = min(q, p.affordable(m, lv.price, t.frozen))
			if q == 0 {
				return false
			}
		}
		p.fill(m, ti, mi, lv, q)
	}
	return false
}

// affordable is the largest lot multiple whose notional plus taker fee at
// price fits in budget. floor(floor(b*D/(D+r))/L) == floor(b*D/((D+r)*L)).
func (p *Processor) affordable(m *market, price Price, budget Units) Units {
	lotN, ok := notional(price, m.cfg.Lot, m.cfg.BaseScale)
	if !ok || lotN <= 0 || budget <= 0 {
		return 0
	}
	b, _ := mulDiv(int64(budget), int64(RateDenominator), int64(RateDenominator+m.cfg.TakerFee))
	k := Units(b) / lotN
	cost := func(k Units) (Units, bool) {
		n, ok := mulDiv(int64(k), int64(lotN), 1)
		if !ok {
			return 0, false
		}
		return withFee(Units(n), m.cfg.TakerFee)
	}
	// Flooring the fee can make one or two more lots affordable than the estimate.
	for i := 0; i < 4; i++ {
		c, ok := cost(k + 1)
		if !ok || c > budget {
			break
		}
		k++
	}
	q, ok := mulDiv(int64(k), int64(m.cfg.Lot), 1)
	if !ok {
		return MaxUnits
	}
	return Units(q)
}

// fill trades q base Units at price between taker ti and maker mi.
func (p *Processor) fill(m *market, ti, mi int32, lv *level, q Units) {
	if m.bin != nil {
		p.binaryFill(m, ti, mi, lv, q)
		return
	}
	t, mk := &p.pool.slots[ti], &p.pool.slots[mi]
	price := lv.price
	cfg := &m.cfg
	n, ok := notional(price, q, cfg.BaseScale)
	if !ok {
		p.fail(m.id, 0, ViolOrderAccounting)
	}
	makerFee, takerFee := feeOf(n, cfg.MakerFee), feeOf(n, cfg.TakerFee)
	buyer, seller, buyerFee, sellerFee := t, mk, takerFee, makerFee
	if t.side == Sell {
		buyer, seller, buyerFee, sellerFee = mk, t, makerFee, takerFee
	}
	spend := n + buyerFee
	if buyer.frozen < spend || seller.frozen < q {
		p.fail(m.id, 0, ViolOrderAccounting)
	}
	buyer.frozen -= spend
	seller.frozen -= q
	t.filled += q
	mk.filled += q
	lv.qty -= q
	t.lastPx = price
	tid := p.nextTradeID
	p.nextTradeID++
	e := p.newEvent(EvTrade)
	e.Market, e.TradeID, e.Price, e.Qty, e.Amount = m.id, tid, price, q, n
	e.OrderID, e.OtherOrderID, e.User, e.OtherUser = mk.id, t.id, mk.user, t.user
	e.Fee, e.Fee2, e.Side = makerFee, takerFee, t.side
	p.move(buyer.acct, cfg.Quote, 0, -spend)
	p.move(buyer.acct, cfg.Base, q, 0)
	p.move(seller.acct, cfg.Base, 0, -q)
	p.move(seller.acct, cfg.Quote, n-sellerFee, 0)
	p.move(feeAcct, cfg.Quote, buyerFee+sellerFee, 0)
	if mk.remaining() == 0 {
		e := p.newEvent(EvOrderFilled)
		e.Market, e.User, e.OrderID, e.OtherOrderID = m.id, mk.user, mk.id, t.id
		e.Price, e.Qty, e.Side, e.Status = price, q, mk.side, StatusFilled
		p.closeOrder(m, mi)
	} else {
		e := p.newEvent(EvOrderPartiallyFilled)
		e.Market, e.User, e.OrderID, e.OtherOrderID = m.id, mk.user, mk.id, t.id
		e.Price, e.Qty, e.Amount, e.Side, e.Status = price, q, mk.remaining(), mk.side, StatusPartiallyFilled
	}
}

// closeOrder takes a resting order off the book, releases what it still has
// frozen and frees its slot.
func (p *Processor) closeOrder(m *market, oi int32) Units {
	o := &p.pool.slots[oi]
	if o.inBook {
		p.unlink(m, oi)
	}
	rel := o.frozen
	if rel != 0 && m.bin != nil {
		p.releaseBinary(m, o, rel)
	} else if rel != 0 {
		p.move(o.acct, o.frozenAsset(m), rel, -rel)
	}
	p.pool.release(oi)
	return rel
}

func (o *order) frozenAsset(m *market) AssetID {
	if o.side == Buy {
		return m.cfg.Quote
	}
	return m.cfg.Base
}

// cancelResting cancels a resting order for reason (OK = the user asked).
func (p *Processor) cancelResting(m *market, oi int32, reason Code) {
	o := &p.pool.slots[oi]
	id, user, side, rem, out, px := o.id, p.accounts[o.acct].id, o.side, o.remaining(), o.outcome, o.price
	rel := p.closeOrder(m, oi)
	e := p.newEvent(EvOrderCancelled)
	e.Market, e.User, e.OrderID, e.Side, e.Detail = m.id, user, id, side, uint8(out)
	e.Qty, e.Amount, e.Code, e.Status = rem, rel, reason, StatusCancelled
	if m.bin != nil {
		e.Price, e.Payout = px, m.bin.payout
	}
}

// finalize decides the taker's fate after matching: rest, fill or expire.
func (p *Processor) finalize(m *market, ti int32, rests bool) {
	t := &p.pool.slots[ti]
	p.res.orderID, p.res.filled = t.id, t.filled
	byQuote := t.byQuote
	switch {
	case t.remaining() == 0:
		p.res.status = StatusFilled
	case rests:
		p.insert(m, ti)
		p.res.status = StatusNew
		if t.filled > 0 {
			p.res.status = StatusPartiallyFilled
		}
		e := p.newEvent(EvOrderAccepted)
		e.Market, e.User, e.OrderID, e.Side = m.id, t.user, t.id, t.side
		e.Price, e.Qty, e.Amount, e.Status, e.Key = t.price, t.remaining(), t.frozen, p.res.status, t.key
		e.Detail = uint8(t.outcome)
		if m.bin != nil {
			e.Payout, e.Frozen = m.bin.payout, t.frozen
		}
		return
	case byQuote && t.filled > 0 && p.budgetSpent(m, t):
		p.res.status = StatusFilled
	default:
		p.res.status = StatusExpired
		expired := t.remaining()
		if byQuote {
			expired = 0 // a budget order has no base quantity left to report
		}
		e := p.newEvent(EvOrderExpired)
		e.Market, e.User, e.OrderID, e.Side = m.id, t.user, t.id, t.side
		e.Qty, e.Amount, e.Status, e.Detail = expired, t.filled, StatusExpired, uint8(t.outcome)
		binaryTerms(e, m, t)
	}
	if p.res.status == StatusFilled {
		e := p.newEvent(EvOrderFilled)
		e.Market, e.User, e.OrderID, e.Side = m.id, t.user, t.id, t.side
		e.Qty, e.Status, e.Detail = t.filled, StatusFilled, uint8(t.outcome)
		binaryTerms(e, m, t)
	}
	p.closeOrder(m, ti)
}

// budgetSpent reports whether a MARKET-by-quote order cannot afford one more
// lot at the current best price — or, if the book ran dry, at its last fill
// price (no later ask could be cheaper) — so it ended FILLED, not EXPIRED.
func (p *Processor) budgetSpent(m *market, t *order) bool {
	opp := m.opposite(t.side)
	px := t.lastPx
	if bi := opp.best(); bi >= 0 {
		px = opp.levels[bi].price
	}
	return p.affordable(m, px, t.frozen) == 0
}
