package core

import "strconv"

// ResumeCheck says why a breaker resolution of halted market id would be
// refused now: it runs resumeMarket's checks (the book's, then a binary
// market's own) and returns the reason of the first that fails and what it
// found, for the operator's answer; ReasonNone if they pass (or there is
// no such market). With rebuild (ResumeRebuild) the level totals and
// counts, which the rebuild replaces, are not judged: what remains is the
// orders' own checks. It changes nothing, so it may run on a read view;
// the processor's own decision stays resumeMarket's.
func (p *Processor) ResumeCheck(id MarketID, rebuild bool) (BreakerReason, string) {
	m := p.marketOf(id)
	if m == nil {
		return ReasonNone, ""
	}
	if !p.bookOK(m, !rebuild) {
		return ReasonOrderbookDesync, p.bookFinding(m, !rebuild)
	}
	if m.bin != nil {
		if vs := p.checkBinary(m, nil); len(vs) > 0 {
			return vs[0].Reason, violationText[vs[0].Detail]
		}
	}
	return ReasonNone, ""
}

// violationText says what a binary market's Viol detail found.
var violationText = [ViolPending + 1]string{
	ViolShares:   "YES shares != NO shares, or a total != the sum of the positions",
	ViolReserve:  "the reserve != payout x the shares outstanding",
	ViolCostSum:  "reserve + pnl pool != the positions' cost sums",
	ViolOversold: "a position's pending sell is above its volume",
	ViolPending:  "a position's pending sell != what its resting SELL orders hold",
}

// bookFinding walks m's book the simple way (one level and one order at a
// time, unlike checkSide's interleaved lanes) and says what its first
// failing check found: it is only called once bookOK has failed, to name
// the failure, so its speed does not matter. aggregates as for bookOK.
func (p *Processor) bookFinding(m *market, aggregates bool) string {
	maxRate := m.maxRate()
	n := int32(0)
	for si, s := range [2]*bookSide{&m.bids, &m.asks} {
		side := [2]string{"bid", "ask"}[si]
		for li := range s.levels {
			lv := &s.levels[li]
			at := side + " level " + strconv.FormatInt(int64(lv.price), 10)
			if li > 0 && !s.better(lv.price, s.levels[li-1].price) {
				return at + ": levels out of price order"
			}
			qty, count, prev := Units(0), int32(0), int32(-1)
			for oi := lv.head; oi >= 0; oi = p.pool.slots[oi].next {
				if count > MaxOrdersPerBook {
					return at + ": its FIFO does not end (a cycle)"
				}
				o := &p.pool.slots[oi]
				ord := at + ": order " + strconv.FormatUint(uint64(o.id), 10)
				switch {
				case o.prev != prev || !o.inBook || o.price != lv.price || o.market != m.id:
					return ord + " is not linked where it rests"
				case o.remaining() <= 0:
					return ord + " rests with nothing left"
				case int(o.acct) >= len(p.accounts) || p.accounts[o.acct].id != o.user:
					return ord + " names no account of its owner"
				case !p.indexedAt(o.id, oi):
					return ord + " is not in the order index at its slot"
				case !p.holdsEnough(m, o, maxRate):
					return ord + " holds less than its remainder can cost"
				case o.hasKey == o.key.IsZero() || (!o.key.IsZero() && p.clientIdx[clientKey{o.user, o.key}] != o.id):
					return ord + ": its client_order_id is not indexed to it"
				}
				qty += o.remaining()
				count++
				prev = oi
			}
			if lv.tail != prev || count == 0 {
				return at + ": its FIFO's tail is not its last order, or it has none"
			}
			if aggregates && (count != lv.count || qty != lv.qty) {
				return at + ": its total says " + strconv.FormatInt(int64(lv.qty), 10) + " in " +
					strconv.FormatInt(int64(lv.count), 10) + " orders, its orders hold " +
					strconv.FormatInt(int64(qty), 10) + " in " + strconv.FormatInt(int64(count), 10) +
					" (rebuild recomputes the totals from the orders)"
			}
			n += count
		}
	}
	if aggregates && n != m.orders {
		return "the market counts " + strconv.FormatInt(int64(m.orders), 10) + " resting orders, its levels hold " +
			strconv.FormatInt(int64(n), 10)
	}
	if aggregates && !bookShapeOK(m) {
		return "the book is crossed or a best level is empty"
	}
	return "the book's check fails"
}
