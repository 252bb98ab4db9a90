package core

// Settlement of a RESOLVED or VOIDED binary market, in bounded slices: first
// its resting orders are cancelled (funds and shares released), then its
// positions are paid in creation order from the reserve — payout per
// winning share, or payout/2 per YES and per NO share when voided — and
// zeroed. The slice that pays the last position moves the pnl pool to the
// fee account, ends settling and, for a resolved market, moves it to
// SETTLED. Each slice is one sequenced command, so replay and snapshots
// taken between slices reproduce it exactly.

// settleSlice processes at most budget orders and positions of m and
// returns how many it processed. ordersOnly stops after the orders (the
// slice resolve and void run themselves).
func (p *Processor) settleSlice(m *market, budget Units, ordersOnly bool) Units {
	b := m.bin
	n := Units(0)
	for n < budget && m.orders > 0 {
		s := &m.bids
		if len(s.levels) == 0 {
			s = &m.asks
		}
		bi := s.best()
		if bi < 0 {
			p.fail(m.id, 0, ViolBookIndex) // orders counted but no level holds them
			return n
		}
		p.cancelResting(m, s.levels[bi].head, CodeMarketClosed)
		n++
	}
	if ordersOnly || m.orders > 0 {
		return n
	}
	for n < budget && int(b.cursor) < len(b.pos) {
		p.settlePosition(m, &b.pos[b.cursor])
		b.cursor++
		n++
	}
	if int(b.cursor) == len(b.pos) {
		p.finishSettlement(m)
	}
	return n
}

// settlePosition pays one position and zeroes it.
func (p *Processor) settlePosition(m *market, ps *position) {
	b := m.bin
	if ps.yesPending != 0 || ps.noPending != 0 {
		p.fail(m.id, 0, ViolPending) // every order was cancelled first
	}
	var shares Units
	pay := Units(0)
	switch b.outcome {
	case OutcomeYes:
		shares, pay = ps.yesVol, ps.yesVol*b.payout
	case OutcomeNo:
		shares, pay = ps.noVol, ps.noVol*b.payout
	default: // voided
		shares = ps.yesVol + ps.noVol
		pay = shares * (b.payout / 2)
	}
	b.reserve -= pay
	p.assets[m.cfg.Quote].total -= pay   // out of the reserve ...
	p.move(ps.acct, m.cfg.Quote, pay, 0) // ... into the account
	b.yesShares -= ps.yesVol
	b.noShares -= ps.noVol
	b.costSum -= ps.yesCost + ps.noCost
	if shares|pay|ps.yesVol|ps.noVol|ps.yesCost|ps.noCost != 0 {
		e := p.newEvent(EvPositionSettled)
		e.Market, e.User, e.Qty, e.Amount = m.id, ps.user, shares, pay
	}
	*ps = position{acct: ps.acct, user: ps.user}
}

// finishSettlement ends settlement once every order is gone and every
// position is paid: the reserve must be exactly 0; the pnl pool goes to the
// fee account; the positions are dropped.
func (p *Processor) finishSettlement(m *market) {
	b := m.bin
	if b.reserve != 0 || b.yesShares|b.noShares != 0 {
		p.fail(m.id, 0, ViolReserve)
	}
	if b.costSum != 0 {
		p.fail(m.id, 0, ViolCostSum) // every position's cost sum was removed with it
	}
	pool := b.pnlPool
	b.pnlPool, b.costSum = 0, 0
	p.assets[m.cfg.Quote].total -= pool
	p.move(feeAcct, m.cfg.Quote, pool, 0)
	b.pos, b.posIdx, b.cursor, b.settling = nil, posIndex{}, 0, false
	final := m.status
	if m.status == MarketResolved {
		final = MarketSettled
		p.setBinaryStatus(m, MarketSettled, b.outcome, 0)
		b.after = MarketSettled
	}
	p.emit(Event{Kind: EvMarketSettled, Market: m.id, Amount: pool, Detail: uint8(final), Flags: uint8(b.outcome)})
}
