package core

// Read-only queries. Like everything in Processor they must be called on the
// goroutine that owns it (or on a processor nobody else is using, e.g. in the
// replay tool); the gateway serves reads from a published view instead.

// AssetBalance is one asset's spot balance of a user.
type AssetBalance struct {
	Asset AssetID
	Balance
}

// Balances returns user's non-zero balances in asset order, appended to dst.
func (p *Processor) Balances(user UserID, dst []AssetBalance) []AssetBalance {
	a := p.accountIdx(user)
	if a < 0 {
		return dst
	}
	for asset := AssetID(1); asset < p.balanceSlots(a); asset++ {
		if b := p.balance(a, asset); b != (Balance{}) {
			dst = append(dst, AssetBalance{Asset: asset, Balance: b})
		}
	}
	return dst
}

// BalanceOf returns user's balance of one asset (zero if none).
func (p *Processor) BalanceOf(user UserID, asset AssetID) Balance {
	a := p.accountIdx(user)
	if a < 0 {
		return Balance{}
	}
	return p.balance(a, asset)
}

// AccountStatusOf returns the user's account status and whether the account exists.
func (p *Processor) AccountStatusOf(user UserID) (AccountStatus, bool) {
	a := p.accountIdx(user)
	if a < 0 {
		return Active, false
	}
	return p.accounts[a].status, true
}

// AssetScale returns a configured asset's decimal scale.
func (p *Processor) AssetScale(id AssetID) (uint8, bool) {
	if id == 0 || id > MaxAssets || !p.assets[id].configured {
		return 0, false
	}
	return p.assets[id].scale, true
}

// Assets returns the ids of the configured assets, ascending.
func (p *Processor) Assets() []AssetID {
	var out []AssetID
	for id := AssetID(1); id <= MaxAssets; id++ {
		if p.assets[id].configured {
			out = append(out, id)
		}
	}
	return out
}

// OpsFull reports whether a first-seen spot deposit or withdraw would be
// refused with TOO_MANY_OPS now.
func (p *Processor) OpsFull() bool { return p.liveOps() >= opsSoftLimit }

// CanCreateAccount reports whether user has an account or one could be created.
func (p *Processor) CanCreateAccount(user UserID) bool { return p.canCreateAccount(user) }

// Users returns the number of accounts (including the fee account).
func (p *Processor) Users() int { return len(p.accounts) }

// RestingOrders returns the number of orders resting on every book, spot
// and binary (O(1): the order index's count).
func (p *Processor) RestingOrders() int { return p.orderIdx.len() }

// PriceLevel is one aggregated level of a book.
type PriceLevel struct {
	Price  Price
	Qty    Units
	Orders int32
}

// Depth appends up to limit best levels of each side (best first).
func (p *Processor) Depth(id MarketID, limit int, bids, asks []PriceLevel) ([]PriceLevel, []PriceLevel, bool) {
	m := p.marketOf(id)
	if m == nil {
		return bids, asks, false
	}
	collect := func(s *bookSide, dst []PriceLevel) []PriceLevel {
		for i := len(s.levels) - 1; i >= 0 && len(s.levels)-1-i < limit; i-- {
			lv := &s.levels[i]
			dst = append(dst, PriceLevel{Price: lv.price, Qty: lv.qty, Orders: lv.count})
		}
		return dst
	}
	return collect(&m.bids, bids), collect(&m.asks, asks), true
}

// MarketView describes a market.
type MarketView struct {
	ID         MarketID
	Cfg        MarketCfg
	Status     MarketStatus
	HaltReason BreakerReason // why it is HALTED (ReasonNone otherwise)
	HaltedAt   Seq           // the seq of the command that halted it
	Orders     int32         // resting orders
}

// Market returns a market's description.
func (p *Processor) Market(id MarketID) (MarketView, bool) {
	m := p.marketOf(id)
	if m == nil {
		return MarketView{}, false
	}
	return MarketView{ID: m.id, Cfg: m.cfg, Status: m.status, HaltReason: m.haltReason, HaltedAt: m.haltSeq,
		Orders: m.orders}, true
}

// Markets returns every configured market in id order.
func (p *Processor) Markets() []MarketView {
	var out []MarketView
	for id := MarketID(1); id <= MaxMarkets; id++ {
		if v, ok := p.Market(id); ok {
			out = append(out, v)
		}
	}
	return out
}

// OrderView is a resting order.
type OrderView struct {
	ID       OrderID
	User     UserID
	Market   MarketID
	Side     Side
	TIF      TimeInForce
	Price    Price
	Qty      Units
	Filled   Units
	Frozen   Units
	ClientID Key
	Seq      Seq
	Outcome  Outcome // binary markets: the order's outcome (Side and Price are the YES book's); 0 on spot
}

func (o *order) view() OrderView {
	return OrderView{ID: o.id, User: o.user, Market: o.market, Side: o.side, TIF: o.tif, Price: o.price,
		Qty: o.qty, Filled: o.filled, Frozen: o.frozen, ClientID: o.key, Seq: o.seq, Outcome: o.outcome}
}

// Order returns a resting order by id.
func (p *Processor) Order(id OrderID) (OrderView, bool) {
	oi, ok := p.orderIdx.get(uint64(id))
	if !ok {
		return OrderView{}, false
	}
	return p.pool.slots[oi].view(), true
}

// OpenOrders appends every resting order of market in priority order (bids
// best first, then asks best first); user 0 means all users... except that
// FeeUser never trades, so 0 is unambiguous.
func (p *Processor) OpenOrders(id MarketID, user UserID, dst []OrderView) []OrderView {
	m := p.marketOf(id)
	if m == nil {
		return dst
	}
	for _, s := range [2]*bookSide{&m.bids, &m.asks} {
		for li := len(s.levels) - 1; li >= 0; li-- {
			for oi := s.levels[li].head; oi >= 0; oi = p.pool.slots[oi].next {
				if o := &p.pool.slots[oi]; user == 0 || o.user == user {
					dst = append(dst, o.view())
				}
			}
		}
	}
	return dst
}

// AssetTotal returns the sum of Avail+Frozen of asset over every account,
// the fee account included, plus the reserves and pnl pools of the binary
// markets it is the quote of (0 for an unknown asset).
func (p *Processor) AssetTotal(asset AssetID) Units {
	if asset == 0 || asset > MaxAssets {
		return 0
	}
	return p.assets[asset].total
}

// AdjustedTotal returns the net of every operator adjustment applied to
// asset (credits minus debits), the part of AssetTotal that did not come
// through spot deposits, withdrawals and refunds.
func (p *Processor) AdjustedTotal(asset AssetID) Units {
	if asset == 0 || asset > MaxAssets {
		return 0
	}
	return p.assets[asset].adjusted
}

// SpotOp returns the recorded first result of the spot operation kind
// (KindSpotDeposit, KindSpotWithdraw, KindSpotRefund or KindAdjust) keyed by
// key, and whether there is one.
func (p *Processor) SpotOp(kind Kind, key Key) (Code, bool) {
	r, ok := p.op(opKey{kind, key})
	return r.code, ok
}
