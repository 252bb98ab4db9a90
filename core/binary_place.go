package core

// Placing an order on a binary market: validated in its own outcome's
// terms, then mapped onto the YES book (binaryMarket.bookTerms) and matched
// by the same code as spot (match, finalize); fills go to binaryFill.

// binPlacement is what validation decided about a new binary order.
type binPlacement struct {
	acct      int32
	out       Outcome
	bookSide  Side
	bookPrice Price
	freeze    Units // quote (user BUY) or shares (user SELL) held at placement
	pos       int32 // a SELL's position (index in binaryMarket.pos)
	rests     bool
}

// placeBinary places c (KindPlaceOrder: Side and Price in the outcome
// Flags names) on binary market m.
func (p *Processor) placeBinary(c *Command, m *market) Code {
	var pl binPlacement
	if code := p.checkBinaryPlace(c, m, &pl); code != OK {
		p.emit(Event{Kind: EvOrderRejected, Code: code, User: c.User, Market: c.Market, Side: c.Side, Key: c.Key,
			Detail: c.Flags})
		p.res.status = StatusRejected
		return code
	}
	oi := p.pool.alloc()
	o := &p.pool.slots[oi]
	*o = order{id: p.nextOrderID, user: c.User, acct: pl.acct, market: c.Market, side: pl.bookSide, typ: Limit,
		tif: c.TIF, stp: c.STP, price: pl.bookPrice, qty: c.Qty, key: c.Key, seq: c.Seq, prev: -1, next: -1,
		outcome: pl.out, hasKey: !c.Key.IsZero()}
	p.nextOrderID++
	if c.Side == Buy {
		pl.pos = m.bin.positionOf(pl.acct) // -1: created at the first fill
		p.move(pl.acct, m.cfg.Quote, -pl.freeze, pl.freeze)
	} else {
		ps := &m.bin.pos[pl.pos]
		*ps.pending(pl.out) += pl.freeze
		p.emitPosition(m, ps)
	}
	o = &p.pool.slots[oi]
	o.pos = pl.pos
	o.frozen = pl.freeze
	p.touchedMarket = c.Market
	stopped := p.match(m, oi)
	if t := &p.pool.slots[oi]; t.filled > 0 && t.remaining() > 0 {
		p.trimHold(m, t) // a better price than the limit is released at once
	}
	p.finalize(m, oi, pl.rests && !stopped)
	return OK
}

// checkBinaryPlace validates a binary order completely; it mutates nothing.
func (p *Processor) checkBinaryPlace(c *Command, m *market, pl *binPlacement) Code {
	if c.User == FeeUser {
		return CodeFeeAccountCannotTrade
	}
	if code := m.status.allowsOrders(); code != OK {
		return code
	}
	b := m.bin
	if b.closeTime != 0 && p.lastTime >= b.closeTime {
		return CodeMarketClosed
	}
	pl.out = Outcome(c.Flags)
	if pl.out != OutcomeYes && pl.out != OutcomeNo {
		return CodeInvalidOutcome
	}
	if c.Side != Buy && c.Side != Sell {
		return CodeInvalidSide
	}
	if c.STP > STPExpireTaker {
		return CodeInvalidCommand
	}
	if !c.Key.canonical() {
		return CodeInvalidKey
	}
	if c.Type != Limit {
		if c.Type == Market {
			return CodeNotSupported
		}
		return CodeInvalidOrderType
	}
	if c.TIF < GTC || c.TIF > PostOnly {
		return CodeInvalidTimeInForce
	}
	if c.Price < m.cfg.Tick || c.Price > Price(b.payout)-m.cfg.Tick || c.Price%m.cfg.Tick != 0 {
		return CodeInvalidPrice
	}
	if c.QuoteQty != 0 {
		return CodeInvalidQuantity
	}
	if code := checkQty(c.Qty, &m.cfg); code != OK {
		return code
	}
	a := p.accountIdx(c.User)
	if a < 0 {
		if c.Side == Sell {
			return CodeInsufficientShares
		}
		return CodeInsufficientBalance
	}
	pl.acct = a
	if code := p.checkOrderAccount(c, a); code != OK {
		return code
	}
	if code := p.checkBinaryFunds(c, m, pl); code != OK {
		return code
	}
	pl.bookSide, pl.bookPrice = b.bookTerms(pl.out, c.Side, c.Price)
	switch c.TIF {
	case PostOnly:
		if p.crossesBest(m, pl.bookSide, pl.bookPrice) {
			return CodePostOnlyWouldTake
		}
	case FOK:
		if q, _, ok := p.simulate(m, c.User, pl.bookSide, pl.bookPrice, c.Qty, c.STP); !ok || q < c.Qty {
			return CodeFOKNotFilled
		}
	}
	pl.rests = c.TIF == GTC || c.TIF == PostOnly
	if !pl.rests {
		return OK
	}
	return p.checkCapacity(m, a, pl.bookSide, pl.bookPrice, c.Qty)
}

// checkBinaryFunds: a BUY holds its own price x qty plus the worst-case
// fee in quote; a SELL holds shares of its outcome, which the position must
// have free of other sells (no short selling: to go short YES, buy NO).
func (p *Processor) checkBinaryFunds(c *Command, m *market, pl *binPlacement) Code {
	if c.Side == Sell {
		i := m.bin.positionOf(pl.acct)
		if i < 0 {
			return CodeInsufficientShares
		}
		ps := &m.bin.pos[i]
		if *ps.vol(pl.out)-*ps.pending(pl.out) < c.Qty {
			return CodeInsufficientShares
		}
		pl.freeze, pl.pos = c.Qty, i
		return OK
	}
	need, ok := binaryHold(c.Price, c.Qty, m.maxRate())
	if !ok {
		return CodeOverflow
	}
	if p.balance(pl.acct, m.cfg.Quote).Avail < need {
		return CodeInsufficientBalance
	}
	pl.freeze = need
	return OK
}
