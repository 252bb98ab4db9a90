package core

import "errors"

// ErrSnapshot is returned by Restore for a snapshot that does not decode or
// does not describe a consistent state.
var ErrSnapshot = errors.New("core: invalid snapshot")

// Restore builds a processor from a serialization made by AppendSnapshot. It
// rebuilds every index and runs the full invariant check; a snapshot that
// decodes but breaks an invariant is refused.
func Restore(cfg Config, b []byte) (*Processor, error) {
	p := New(cfg)
	p.accounts, p.balExt = p.accounts[:0], p.balExt[:0]
	p.userIdx.reset()
	r := rbuf{b: b}
	if r.u8() != SnapshotVersion {
		return nil, ErrSnapshot
	}
	p.lastSeq = Seq(r.uv())
	p.lastTime = r.sv()
	p.nextOrderID = OrderID(r.uv())
	p.nextTradeID = r.uv()
	p.halted = r.u8() == 1
	for n := r.uv(); n > 0 && r.err == nil; n-- {
		a := r.uv()
		if a == 0 || a > MaxAssets {
			return nil, ErrSnapshot
		}
		st := &p.assets[a]
		st.configured, st.scale = true, r.u8()
		st.credited, st.debited = Units(r.sv()), Units(r.sv())
	}
	// Accounts come after markets in the stream but orders need them; decode
	// markets into a staging list first.
	type staged struct {
		m      *market
		orders [2][]order
	}
	var ms []staged
	for n := r.uv(); n > 0 && r.err == nil; n-- {
		s := staged{m: p.readMarket(&r)}
		for side := 0; side < 2 && r.err == nil; side++ {
			cnt := r.uv()
			if cnt > MaxOrdersPerBook || cnt > uint64(len(r.b)) {
				return nil, ErrSnapshot
			}
			for i := uint64(0); i < cnt && r.err == nil; i++ {
				s.orders[side] = append(s.orders[side], readOrder(&r, s.m, Side(side+1)))
			}
		}
		ms = append(ms, s)
	}
	if err := p.readAccounts(&r); err != nil {
		return nil, err
	}
	for _, s := range ms {
		if s.m == nil || p.markets[s.m.id] != nil {
			return nil, ErrSnapshot
		}
		p.markets[s.m.id] = s.m
		for side := range s.orders {
			for _, o := range s.orders[side] {
				a := p.accountIdx(o.user)
				if a < 0 || o.remaining() <= 0 {
					return nil, ErrSnapshot
				}
				oi := p.pool.alloc()
				o.acct, o.prev, o.next = a, -1, -1
				p.pool.slots[oi] = o
				p.insert(s.m, oi)
			}
		}
	}
	if err := p.readOps(&r); err != nil {
		return nil, err
	}
	if r.err != nil || len(r.b) != 0 {
		return nil, ErrSnapshot
	}
	for a := range p.assets {
		p.assets[a].total = p.assets[a].credited - p.assets[a].debited
	}
	for i := range p.opLog {
		if k, r := p.opLog[i].k, p.opLog[i].r; k.kind == KindAdjust && r.code == OK {
			p.assets[r.asset].adjusted += r.amount
		}
	}
	if p.accountIdx(FeeUser) != feeAcct {
		return nil, ErrSnapshot
	}
	if v, _ := p.UnhaltedViolations(); len(v) != 0 {
		return nil, errors.Join(ErrSnapshot, errors.New("core: snapshot breaks invariants"))
	}
	return p, nil
}

func (p *Processor) readMarket(r *rbuf) *market {
	id := r.uv()
	if id == 0 || id > MaxMarkets {
		r.fail()
		return nil
	}
	m := &market{id: MarketID(id), bids: bookSide{bid: true}}
	c := &m.cfg
	c.Base, c.Quote, c.BaseScale = AssetID(r.uv()), AssetID(r.uv()), r.u8()
	c.Tick, c.Lot, c.MinQty, c.MaxQty = Price(r.sv()), Units(r.sv()), Units(r.sv()), Units(r.sv())
	c.MakerFee, c.TakerFee = Rate(r.sv()), Rate(r.sv())
	m.status = MarketStatus(r.u8())
	if r.err == nil && (p.validMarketCfg(c) != OK || m.status > MarketHalted) {
		r.fail()
	}
	return m
}

func readOrder(r *rbuf, m *market, side Side) order {
	o := order{side: side, typ: Limit}
	if m != nil {
		o.market = m.id
	}
	o.id, o.user = OrderID(r.uv()), UserID(r.uv())
	o.tif, o.stp = TimeInForce(r.u8()), STP(r.u8())
	o.price, o.qty, o.filled, o.frozen = Price(r.sv()), Units(r.sv()), Units(r.sv()), Units(r.sv())
	o.key = r.key()
	o.seq = Seq(r.uv())
	if (o.tif != GTC && o.tif != PostOnly) || o.stp > STPExpireTaker || o.price <= 0 {
		r.fail()
	}
	return o
}

func (p *Processor) readAccounts(r *rbuf) error {
	n := r.uv()
	if n > MaxUsers || n > uint64(len(r.b)) {
		return ErrSnapshot
	}
	for ; n > 0 && r.err == nil; n-- {
		u := UserID(r.uv())
		if _, dup := p.userIdx.get(u); dup {
			return ErrSnapshot
		}
		a := p.ensureAccount(u)
		st := AccountStatus(r.u8())
		if st > Disabled {
			return ErrSnapshot
		}
		p.accounts[a].status = st
		for k := r.uv(); k > 0 && r.err == nil; k-- {
			asset := r.uv()
			if asset == 0 || asset > MaxAssets || !p.assets[asset].configured {
				return ErrSnapshot
			}
			*p.balanceRef(a, AssetID(asset)) = Balance{Avail: Units(r.sv()), Frozen: Units(r.sv())}
		}
	}
	return r.err
}

func (p *Processor) readOps(r *rbuf) error {
	n := r.uv()
	if n > MaxProcessedOps || n > uint64(len(r.b)) {
		return ErrSnapshot
	}
	for ; n > 0 && r.err == nil; n-- {
		k := opKey{kind: Kind(r.u8()), key: r.key()}
		rec := opRecord{user: UserID(r.uv()), asset: AssetID(r.uv()), amount: Units(r.sv()), code: Code(r.uv())}
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
