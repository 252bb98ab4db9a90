package core

// The five invariants of spec 004 (§6.3–6.4) for binary markets:
//
//  1. total_yes_shares == total_no_shares                 INVARIANT_SHARES
//  2. reserve == total_yes_shares x payout                INVARIANT_RESERVE
//  3. reserve + pnl_pool == sum of positions' cost sums   INVARIANT_COST_SUM
//  4. double-entry conservation: the quote asset's        INVARIANT_BALANCE
//     balances + reserves + pnl pools == credited - debited (checkBalances)
//  5. per position: yes_volume >= yes_pending_sell,       INVARIANT_OVERSOLD
//     no_volume >= no_pending_sell
//
// Every command that touched a binary market checks 1–3 in O(1) on the
// market's totals (totalsViolation; the cost sum is a running total), 4 on
// the quote asset's running total (checkCheap), and 5 on every position a
// fill or release changed (binary_fill.go). The full check re-derives all
// of it from the positions and the resting orders (checkBinary). While
// settling, 1 and 3 are replaced by reserve == payout x unsettled winning
// shares (VOID: payout/2 x unsettled YES + NO shares).

// totalsViolation runs the O(1) checks of the market's totals and returns
// the Viol detail of the first that fails, or 0.
func (b *binaryMarket) totalsViolation() uint8 {
	if b.yesShares < 0 || b.noShares < 0 {
		return ViolShares
	}
	if b.reserve < 0 {
		return ViolReserve
	}
	if b.pnlPool < 0 {
		return ViolCostSum
	}
	if !b.settling {
		if b.yesShares != b.noShares {
			return ViolShares
		}
		if want, ok := binNotional(Price(b.payout), b.yesShares); !ok || want != b.reserve {
			return ViolReserve
		}
		if s, ok := addUnits(b.reserve, b.pnlPool); !ok || s != b.costSum {
			return ViolCostSum
		}
		return 0
	}
	var want Units
	ok := true
	switch b.outcome {
	case OutcomeYes:
		want, ok = binNotional(Price(b.payout), b.yesShares)
	case OutcomeNo:
		want, ok = binNotional(Price(b.payout), b.noShares)
	default:
		var s Units
		if s, ok = addUnits(b.yesShares, b.noShares); ok {
			want, ok = binNotional(Price(b.payout/2), s)
		}
	}
	if !ok || want != b.reserve {
		return ViolReserve
	}
	return 0
}

// checkBinary appends the violations of binary market m found by
// re-deriving its totals from its positions and its positions' pending
// sells from its resting orders.
func (p *Processor) checkBinary(m *market, out []Violation) []Violation {
	b := m.bin
	var bad [ViolPending + 1]bool
	report := func(d uint8) {
		if !bad[d] {
			bad[d] = true
			out = append(out, viol(m.id, 0, d))
		}
	}
	if d := b.totalsViolation(); d != 0 {
		report(d)
	}
	var yes, no, cost Units
	sumOK := true
	for i := range b.pos {
		ps := &b.pos[i]
		var ok1, ok2, ok3, ok4 bool
		yes, ok1 = addUnits(yes, ps.yesVol)
		no, ok2 = addUnits(no, ps.noVol)
		cost, ok3 = addUnits(cost, ps.yesCost)
		cost, ok4 = addUnits(cost, ps.noCost)
		sumOK = sumOK && ok1 && ok2 && ok3 && ok4
		if ps.yesPending < 0 || ps.noPending < 0 || ps.yesVol < ps.yesPending || ps.noVol < ps.noPending {
			report(ViolOversold)
		}
		if j, ok := b.posIdx.get(ps.acct); !ok || j != int32(i) || int(ps.acct) >= len(p.accounts) ||
			p.accounts[ps.acct].id != ps.user {
			report(ViolPending)
		}
	}
	if !sumOK || yes != b.yesShares || no != b.noShares {
		report(ViolShares)
	}
	if !sumOK || cost != b.costSum {
		report(ViolCostSum)
	}
	if b.posIdx.len() != len(b.pos) {
		report(ViolPending)
	}
	if !p.pendingMatchesOrders(m) {
		report(ViolPending)
	}
	if (m.status == MarketSettled || m.status == MarketDraft) && (len(b.pos) != 0 || b.reserve|b.pnlPool != 0) {
		report(ViolReserve)
	}
	return out
}

// pendingMatchesOrders reports whether every position's pending sells
// equal the shares its owner's resting SELL orders hold.
func (p *Processor) pendingMatchesOrders(m *market) bool {
	b := m.bin
	held := make([]Units, 2*len(b.pos))
	ok := true
	for _, s := range [2]*bookSide{&m.bids, &m.asks} {
		for li := range s.levels {
			n := 0
			for oi := s.levels[li].head; oi >= 0 && n <= MaxOrdersPerBook; oi = p.pool.slots[oi].next {
				n++
				o := &p.pool.slots[oi]
				if o.outcome == 0 {
					ok = false // a spot order in a binary book
					continue
				}
				if o.userSide() != Sell {
					if o.pos >= 0 && o.pos != b.positionOf(o.acct) {
						ok = false // the order's cached position is its owner's (-1: look it up at the first fill)
					}
					continue
				}
				i := b.positionOf(o.acct)
				if i < 0 || o.pos != i {
					ok = false
					continue
				}
				held[2*int(i)+int(o.outcome)-1] += o.frozen
			}
		}
	}
	for i := range b.pos {
		if held[2*i] != b.pos[i].yesPending || held[2*i+1] != b.pos[i].noPending {
			ok = false
		}
	}
	return ok
}

// binaryHeldAsset is the asset a binary order holds: the quote for a BUY,
// none (0: shares of its position) for a SELL.
func (m *market) binaryHeldAsset(o *order) AssetID {
	if o.userSide() == Buy {
		return m.cfg.Quote
	}
	return 0
}

// binaryHoldsEnough reports whether resting binary order o holds what its
// remainder can still cost: its shares for a SELL, its own price x
// remainder plus the worst-case fee for a BUY.
func (m *market) binaryHoldsEnough(o *order, maxRate Rate) bool {
	if o.userSide() == Sell {
		return o.frozen >= o.remaining()
	}
	need, ok := binaryHold(m.bin.ownPrice(o.outcome, o.price), o.remaining(), maxRate)
	return ok && o.frozen >= need
}

// addBinaryPools adds every binary market's reserve and pnl pool to its
// quote asset's sum: the core holds that money outside every account.
func (p *Processor) addBinaryPools(sums *[MaxAssets + 1]Units) {
	for _, m := range p.markets {
		if m != nil && m.bin != nil {
			s, _ := addUnits(sums[m.cfg.Quote], m.bin.reserve)
			sums[m.cfg.Quote], _ = addUnits(s, m.bin.pnlPool)
		}
	}
}
