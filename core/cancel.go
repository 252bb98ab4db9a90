package core

// ownOrder finds a resting order of c.User by OrderID or, when OrderID is 0,
// by client order id. Another user's order is reported as not found, so its
// existence is not revealed.
func (p *Processor) ownOrder(c *Command) (int32, Code) {
	id := c.OrderID
	if id == 0 {
		if c.Key.IsZero() || !c.Key.canonical() {
			return -1, CodeOrderNotFound
		}
		var ok bool
		if id, ok = p.clientIdx[clientKey{c.User, c.Key}]; !ok {
			return -1, CodeOrderNotFound
		}
	}
	oi, ok := p.orderIdx.get(uint64(id))
	if !ok {
		return -1, CodeOrderNotFound
	}
	o := &p.pool.slots[oi]
	if p.accounts[o.acct].id != c.User || (c.Market != 0 && c.Market != o.market) {
		return -1, CodeOrderNotFound
	}
	if code := p.markets[o.market].status.allowsCancels(); code != OK {
		return -1, code
	}
	return oi, OK
}

func (p *Processor) cancelOrder(c *Command) Code {
	oi, code := p.ownOrder(c)
	if code != OK {
		return code
	}
	o := &p.pool.slots[oi]
	m := p.markets[o.market]
	p.res.orderID, p.res.filled, p.res.status = o.id, o.filled, StatusCancelled
	p.touchedMarket = m.id
	p.cancelResting(m, oi, OK)
	return OK
}

// modifyOrder changes a resting order's price and/or total quantity. A
// quantity decrease at the same price keeps time priority; a price change or a
// quantity increase takes the order off the book and re-enters it as a GTC
// (or POST_ONLY) limit with the same id, which may trade, losing priority.
func (p *Processor) modifyOrder(c *Command) Code {
	oi, code := p.ownOrder(c)
	if code != OK {
		return code
	}
	o := &p.pool.slots[oi]
	m := p.markets[o.market]
	if m.bin != nil {
		return CodeNotSupported // binary orders: cancel and place again
	}
	if code := m.status.allowsOrders(); code != OK {
		return code
	}
	a := &p.accounts[o.acct]
	switch a.status {
	case Frozen:
		return CodeAccountFrozen
	case Disabled:
		return CodeAccountDisabled
	}
	price, qty := o.price, o.qty
	if c.Price != 0 {
		price = c.Price
	}
	if c.Qty != 0 {
		qty = c.Qty
	}
	if c.Price < 0 || !m.cfg.onTick(price) {
		return CodeInvalidPrice
	}
	if code := checkQty(qty, &m.cfg); code != OK {
		return code
	}
	if qty <= o.filled {
		return CodeInvalidQuantity
	}
	if price == o.price && qty == o.qty {
		return CodeNothingToModify
	}
	need, code := p.frozenFor(m, o.side, price, qty-o.filled)
	if code != OK {
		return code
	}
	p.touchedMarket = m.id
	if price == o.price && qty < o.qty {
		p.shrink(m, oi, qty, need)
		return OK
	}
	return p.reenter(m, oi, price, qty, need)
}

// frozenFor is what a resting order of remaining quantity rem at price must hold.
func (p *Processor) frozenFor(m *market, side Side, price Price, rem Units) (Units, Code) {
	if side == Sell {
		return rem, OK
	}
	n, ok := notional(price, rem, m.cfg.BaseScale)
	if !ok {
		return 0, CodeOverflow
	}
	if n, ok = withFee(n, m.maxRate()); !ok {
		return 0, CodeOverflow
	}
	return n, OK
}

// shrink lowers a resting order's quantity in place (keeps priority).
func (p *Processor) shrink(m *market, oi int32, qty, need Units) {
	o := &p.pool.slots[oi]
	delta := o.qty - qty
	if lv := m.side(o.side).levelFor(o.price); lv != nil {
		lv.qty -= delta
	}
	o.qty = qty
	// need <= o.frozen: the old requirement covered more quantity at the same price.
	if rel := o.frozen - need; rel > 0 {
		o.frozen = need
		p.move(o.acct, o.frozenAsset(m), rel, -rel)
	}
	p.emitModified(m, o, 1)
}

// reenter validates and applies a price change or quantity increase.
func (p *Processor) reenter(m *market, oi int32, price Price, qty, need Units) Code {
	o := &p.pool.slots[oi]
	asset := o.frozenAsset(m)
	if avail := p.balance(o.acct, asset).Avail + o.frozen; avail < need {
		return CodeInsufficientBalance
	}
	if o.tif == PostOnly && p.crossesBest(m, o.side, price) {
		return CodePostOnlyWouldTake
	}
	add := qty - o.filled // the new remainder, joining the level at price
	if price == o.price {
		add -= o.remaining() // it is already counted in its own level
	}
	if code := p.canAdd(m.side(o.side), price, add); code != OK {
		return code
	}
	p.unlink(m, oi)
	if d := need - o.frozen; d != 0 {
		p.move(o.acct, asset, -d, d)
		o.frozen = need
	}
	o.price, o.qty, o.seq = price, qty, p.lastSeq
	p.emitModified(m, o, 0)
	stopped := p.match(m, oi)
	p.finalize(m, oi, !stopped)
	return OK
}

func (p *Processor) emitModified(m *market, o *order, kept uint8) {
	p.res.orderID, p.res.filled = o.id, o.filled
	p.res.status = StatusNew
	if o.filled > 0 {
		p.res.status = StatusPartiallyFilled
	}
	p.emit(Event{Kind: EvOrderModified, Market: m.id, User: o.user, OrderID: o.id, Side: o.side,
		Price: o.price, Qty: o.qty, Amount: o.frozen, Flags: kept, Status: p.res.status})
}
