package core

import "math/bits"

func (p *Processor) configAsset(c *Command) Code {
	if c.Asset == 0 || c.Asset > MaxAssets {
		return CodeInvalidAsset
	}
	if c.BaseScale > MaxBaseScale {
		return CodeInvalidCommand
	}
	st := &p.assets[c.Asset]
	if st.configured {
		if st.scale != c.BaseScale {
			return CodeInvalidAsset // a scale never changes once money exists in it
		}
		return OK
	}
	st.configured, st.scale = true, c.BaseScale
	p.emit(Event{Kind: EvAssetConfigured, Asset: c.Asset})
	return OK
}

// validMarketCfg checks a market config against the assets it names.
func (p *Processor) validMarketCfg(cfg *MarketCfg) Code {
	if cfg.Base == 0 || cfg.Base > MaxAssets || cfg.Quote == 0 || cfg.Quote > MaxAssets || cfg.Base == cfg.Quote ||
		!p.assets[cfg.Base].configured || !p.assets[cfg.Quote].configured {
		return CodeInvalidAsset
	}
	if cfg.BaseScale != p.assets[cfg.Base].scale {
		return CodeInvalidMarketConfig
	}
	if cfg.Tick <= 0 || cfg.Lot <= 0 || cfg.MinQty <= 0 || cfg.MaxQty < cfg.MinQty ||
		cfg.MinQty%cfg.Lot != 0 || cfg.MaxQty%cfg.Lot != 0 {
		return CodeInvalidMarketConfig
	}
	if cfg.MakerFee < 0 || cfg.MakerFee > MaxFeeRate || cfg.TakerFee < 0 || cfg.TakerFee > MaxFeeRate {
		return CodeInvalidMarketConfig
	}
	// tick*lot must be a multiple of 10^BaseScale so every notional is exact.
	hi, lo := bits.Mul64(uint64(cfg.Tick), uint64(cfg.Lot))
	d := pow10[cfg.BaseScale]
	if hi >= d {
		hi %= d
	}
	if _, rem := bits.Div64(hi, lo, d); rem != 0 {
		return CodeInvalidMarketConfig
	}
	return OK
}

func (p *Processor) configMarket(c *Command) Code {
	if c.Market == 0 || c.Market > MaxMarkets {
		return CodeInvalidMarket
	}
	if code := p.validMarketCfg(&c.Cfg); code != OK {
		return code
	}
	m := p.markets[c.Market]
	if m != nil && (m.orders > 0 || m.bin != nil) {
		return CodeMarketExists // tick, lot and fees are baked into resting orders' frozen funds
	}
	if m == nil {
		m = &market{id: c.Market, bids: bookSide{bid: true}}
		p.markets[c.Market] = m
	}
	m.cfg = c.Cfg
	p.emit(Event{Kind: EvMarketConfigured, Market: c.Market})
	return OK
}

func (p *Processor) marketOf(id MarketID) *market {
	if id == 0 || id > MaxMarkets {
		return nil
	}
	return p.markets[id]
}

func (p *Processor) setAccountStatus(c *Command) Code {
	if c.Status > Disabled {
		return CodeInvalidStatus
	}
	if !p.canCreateAccount(c.User) {
		return CodeTooManyUsers
	}
	a := p.ensureAccount(c.User)
	p.accounts[a].status = c.Status
	p.emit(Event{Kind: EvAccountStatus, User: c.User, AcctSt: c.Status})
	return OK
}

// violate records a violation the full check found and trips the breaker
// of its market (or of the core). Nothing is repaired.
func (p *Processor) violate(v Violation) {
	p.emit(Event{Kind: EvInvariantViolation, Market: v.Market, Asset: v.Asset, Code: CodeInvariantViolation, Detail: v.Detail})
	p.trip(v.Market, v.Reason, 0)
}
