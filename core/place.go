package core

// placement is what validation decided about a new order, before any mutation.
type placement struct {
	m      *market
	acct   int32
	asset  AssetID // the asset frozen: quote for buys, base for sells
	freeze Units   // amount frozen at placement
	rests  bool    // the remainder may rest on the book (GTC / POST_ONLY limit)
}

// maxRate is the worst-case fee rate an order of this market can pay.
func (m *market) maxRate() Rate {
	if m.cfg.MakerFee > m.cfg.TakerFee {
		return m.cfg.MakerFee
	}
	return m.cfg.TakerFee
}

func (p *Processor) placeOrder(c *Command) Code {
	m := p.marketOf(c.Market)
	if m != nil && m.bin != nil {
		return p.placeBinary(c, m)
	}
	var pl placement
	code := p.checkPlace(c, m, &pl)
	if code != OK {
		p.emit(Event{Kind: EvOrderRejected, Code: code, User: c.User, Market: c.Market, Side: c.Side, Key: c.Key})
		p.res.status = StatusRejected
		return code
	}
	oi := p.pool.alloc()
	o := &p.pool.slots[oi]
	*o = order{id: p.nextOrderID, user: c.User, acct: pl.acct, market: c.Market, side: c.Side, typ: c.Type,
		tif: c.TIF, stp: c.STP, price: c.Price, qty: c.Qty, key: c.Key, seq: c.Seq, prev: -1, next: -1,
		hasKey: !c.Key.IsZero()}
	if c.Type == Market && c.QuoteQty > 0 {
		o.qty, o.byQuote = MaxUnits, true // bounded by the quote budget held in frozen
	}
	p.nextOrderID++
	p.move(pl.acct, pl.asset, -pl.freeze, pl.freeze)
	o.frozen = pl.freeze
	p.touchedMarket = c.Market
	stopped := p.match(pl.m, oi)
	p.finalize(pl.m, oi, pl.rests && !stopped)
	return OK
}

// checkPlace validates a new order for market m (c.Market's, nil if none)
// completely; it mutates nothing.
func (p *Processor) checkPlace(c *Command, m *market, pl *placement) Code {
	if c.User == FeeUser {
		return CodeFeeAccountCannotTrade
	}
	if m == nil {
		return CodeInvalidMarket
	}
	pl.m = m
	if code := m.status.allowsOrders(); code != OK {
		return code
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
	if code := p.checkShape(c, m); code != OK {
		return code
	}
	a := p.accountIdx(c.User)
	if a < 0 {
		return CodeInsufficientBalance
	}
	pl.acct = a
	if code := p.checkOrderAccount(c, a); code != OK {
		return code
	}
	if code := p.checkFunds(c, m, pl); code != OK {
		return code
	}
	if c.Type == Limit {
		return p.checkLimitRules(c, m, pl)
	}
	return OK
}

// checkShape validates type, time in force, price and quantity against the market.
func (p *Processor) checkShape(c *Command, m *market) Code {
	cfg := &m.cfg
	switch c.Type {
	case Limit:
		if c.TIF < GTC || c.TIF > PostOnly {
			return CodeInvalidTimeInForce
		}
		if c.Price <= 0 || !cfg.onTick(c.Price) {
			return CodeInvalidPrice
		}
		if c.QuoteQty != 0 {
			return CodeInvalidQuantity
		}
		return checkQty(c.Qty, cfg)
	case Market:
		if c.TIF != 0 && c.TIF != IOC {
			return CodeInvalidTimeInForce
		}
		if c.Price != 0 {
			return CodeInvalidPrice
		}
		if c.QuoteQty != 0 {
			if c.Qty != 0 || c.Side != Buy || c.QuoteQty < 0 {
				return CodeInvalidQuantity
			}
			return OK
		}
		return checkQty(c.Qty, cfg)
	}
	return CodeInvalidOrderType
}

// onTick reports whether price is a multiple of the tick; onLot, whether
// q is a multiple of the lot. A step of 1 (common) skips the division.
func (cfg *MarketCfg) onTick(price Price) bool { return cfg.Tick == 1 || price%cfg.Tick == 0 }

func (cfg *MarketCfg) onLot(q Units) bool { return cfg.Lot == 1 || q%cfg.Lot == 0 }

func checkQty(q Units, cfg *MarketCfg) Code {
	switch {
	case q <= 0 || !cfg.onLot(q):
		return CodeInvalidQuantity
	case q < cfg.MinQty:
		return CodeQuantityTooSmall
	case q > cfg.MaxQty:
		return CodeQuantityTooLarge
	}
	return OK
}

// checkFunds decides what to freeze and checks the available balance.
// checkOrderAccount refuses an order of account a (c.User's) when the
// account is frozen or disabled, or c's client order id is already live
// (the existing order's id goes to the result). Spot and binary placement.
func (p *Processor) checkOrderAccount(c *Command, a int32) Code {
	switch p.accounts[a].status {
	case Frozen:
		return CodeAccountFrozen
	case Disabled:
		return CodeAccountDisabled
	}
	if !c.Key.IsZero() {
		if id, dup := p.clientIdx[clientKey{c.User, c.Key}]; dup {
			p.res.orderID = id
			return CodeDuplicateClientOrderID
		}
	}
	return OK
}

func (p *Processor) checkFunds(c *Command, m *market, pl *placement) Code {
	if c.Side == Sell {
		pl.asset, pl.freeze = m.cfg.Base, c.Qty
	} else {
		pl.asset = m.cfg.Quote
		switch {
		case c.Type == Limit:
			n, ok := notional(c.Price, c.Qty, m.cfg.BaseScale)
			if !ok {
				return CodeOverflow
			}
			if pl.freeze, ok = withFee(n, m.maxRate()); !ok {
				return CodeOverflow
			}
		case c.QuoteQty > 0:
			pl.freeze = c.QuoteQty
		default: // MARKET BUY by base quantity: freeze exactly what the walk will cost
			q, cost, ok := p.simulate(m, c.User, Buy, 0, c.Qty, c.STP)
			if !ok {
				return CodeOverflow
			}
			if q == 0 {
				return CodeNoLiquidity
			}
			pl.freeze = cost
		}
	}
	if c.Type == Market {
		if q, _, _ := p.simulate(m, c.User, c.Side, 0, m.cfg.Lot, c.STP); q == 0 {
			return CodeNoLiquidity
		}
	}
	if p.balance(pl.acct, pl.asset).Avail < pl.freeze {
		return CodeInsufficientBalance
	}
	return OK
}

// checkLimitRules applies POST_ONLY, FOK and the resting-capacity limits.
func (p *Processor) checkLimitRules(c *Command, m *market, pl *placement) Code {
	switch c.TIF {
	case PostOnly:
		if p.crossesBest(m, c.Side, c.Price) {
			return CodePostOnlyWouldTake
		}
	case FOK:
		if q, _, ok := p.simulate(m, c.User, c.Side, c.Price, c.Qty, c.STP); !ok || q < c.Qty {
			return CodeFOKNotFilled
		}
	}
	pl.rests = c.TIF == GTC || c.TIF == PostOnly
	if !pl.rests {
		return OK
	}
	return p.checkCapacity(m, pl.acct, c.Side, c.Price, c.Qty)
}

// checkCapacity checks that one more order of quantity qty may rest at price
// (conservatively, before matching), including the level's total quantity.
func (p *Processor) checkCapacity(m *market, a int32, side Side, price Price, qty Units) Code {
	if p.accounts[a].openOrders >= MaxOpenOrdersPerUser {
		return CodeTooManyOpenOrders
	}
	if m.orders >= MaxOrdersPerBook {
		return CodeBookFull
	}
	return p.canAdd(m.side(side), price, qty)
}

// crossesBest reports whether a limit at price would trade against the best opposite level.
func (p *Processor) crossesBest(m *market, side Side, price Price) bool {
	opp := m.opposite(side)
	bi := opp.best()
	return bi >= 0 && crosses(side, price, opp.levels[bi].price)
}

// crosses reports whether a taker on side with limit price trades at level price lp.
func crosses(side Side, price, lp Price) bool {
	if side == Buy {
		return lp <= price
	}
	return lp >= price
}
