package core

// Read-only queries of binary markets (same rules as query.go).

// BinaryView describes a binary market.
type BinaryView struct {
	MarketView
	Question  string  // what the market asks ("" for a market configured before questions)
	Payout    Units   // quote Units a winning share pays
	CloseTime int64   // unix ns; 0: none
	Outcome   Outcome // set once resolved; 0 otherwise (and when voided)
	Settling  bool    // RESOLVED / VOIDED with orders or positions still to settle
	Reserve   Units   // quote held for the outstanding shares
	PnlPool   Units   // fees collected, paid to the fee account at settlement
	YesShares Units   // YES shares outstanding
	NoShares  Units   // NO shares outstanding
	Positions int     // positions held (dropped when settlement ends)
	Settled   int     // positions paid so far while settling
	// Best bid and ask of each outcome in its own terms (0: none). The NO
	// view mirrors the YES book: NO bid = payout - YES ask, NO ask = payout - YES bid.
	YesBid, YesAsk, NoBid, NoAsk Price
}

// Binary returns a binary market's description.
func (p *Processor) Binary(id MarketID) (BinaryView, bool) {
	m := p.marketOf(id)
	if m == nil || m.bin == nil {
		return BinaryView{}, false
	}
	mv, _ := p.Market(id)
	b := m.bin
	v := BinaryView{MarketView: mv, Question: b.question, Payout: b.payout, CloseTime: b.closeTime,
		Outcome: b.outcome, Settling: b.settling, Reserve: b.reserve, PnlPool: b.pnlPool, YesShares: b.yesShares,
		NoShares: b.noShares, Positions: len(b.pos), Settled: int(b.cursor)}
	if i := m.bids.best(); i >= 0 {
		v.YesBid = m.bids.levels[i].price
		v.NoAsk = Price(b.payout) - v.YesBid
	}
	if i := m.asks.best(); i >= 0 {
		v.YesAsk = m.asks.levels[i].price
		v.NoBid = Price(b.payout) - v.YesAsk
	}
	return v, true
}

// PositionView is one user's position in a binary market.
type PositionView struct {
	Market                MarketID
	User                  UserID
	YesVolume, NoVolume   Units // shares held, pending sells included
	YesCostSum, NoCostSum Units // net quote put in (see doc.go)
	YesPending, NoPending Units // shares held by resting SELL orders
}

// Position returns user's position in binary market id (false: none).
func (p *Processor) Position(user UserID, id MarketID) (PositionView, bool) {
	m := p.marketOf(id)
	a := p.accountIdx(user)
	if m == nil || m.bin == nil || a < 0 {
		return PositionView{}, false
	}
	i := m.bin.positionOf(a)
	if i < 0 {
		return PositionView{}, false
	}
	ps := &m.bin.pos[i]
	return PositionView{Market: id, User: user, YesVolume: ps.yesVol, NoVolume: ps.noVol, YesCostSum: ps.yesCost,
		NoCostSum: ps.noCost, YesPending: ps.yesPending, NoPending: ps.noPending}, true
}

// Positions appends user's positions in every binary market, by market id.
func (p *Processor) Positions(user UserID, dst []PositionView) []PositionView {
	for id := MarketID(1); id <= MaxMarkets; id++ {
		if v, ok := p.Position(user, id); ok {
			dst = append(dst, v)
		}
	}
	return dst
}

// BinaryDepth appends up to limit best levels of each side of outcome's
// view of binary market id (best first). The YES view is the book; the NO
// view mirrors it: a YES ask at p is a NO bid at payout - p.
func (p *Processor) BinaryDepth(id MarketID, out Outcome, limit int, bids, asks []PriceLevel) ([]PriceLevel, []PriceLevel, bool) {
	m := p.marketOf(id)
	if m == nil || m.bin == nil || (out != OutcomeYes && out != OutcomeNo) {
		return bids, asks, false
	}
	if out == OutcomeYes {
		return p.Depth(id, limit, bids, asks)
	}
	n0b, n0a := len(bids), len(asks)
	asks, bids, _ = p.Depth(id, limit, asks, bids) // YES bids are NO asks and vice versa
	for i := n0b; i < len(bids); i++ {
		bids[i].Price = Price(m.bin.payout) - bids[i].Price
	}
	for i := n0a; i < len(asks); i++ {
		asks[i].Price = Price(m.bin.payout) - asks[i].Price
	}
	return bids, asks, true
}
