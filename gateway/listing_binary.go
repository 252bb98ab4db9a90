package gateway

import (
	"strconv"

	"github.com/ubscore/ubscore/core"
)

// Binary markets in the order history and my-trades (issue 40): their
// orders and fills are listed beside spot ones, named by the market's id
// ("7"), with "outcome" and the order's own side and price (its outcome's
// terms, as placed: BUY NO @0.30, never the YES book's 0.70); quantities
// are whole shares, money is in the market's quote asset.

// binaryMarketID reads ?market= as a binary market's id: one the core
// holds as binary now.
func (s *Server) binaryMarketID(v []byte) (core.MarketID, bool) {
	id, ok := parseBinaryID(v)
	if !ok {
		return 0, false
	}
	var bin bool
	if err := s.backend.Read(func(p *core.Processor, _ *History) error {
		_, bin = p.Binary(id)
		return nil
	}); err != nil {
		return 0, false
	}
	return id, bin
}

// listMarkets holds the binary markets a page names, resolved from the core
// (resolveBinary) as a Market named by its id, with shares (scale 0) for
// base and its quote asset; spot ones come from the Registry. A binary
// market the core no longer holds (archived) is not resolved: its rows are
// left out.
type listMarkets struct {
	bin map[core.MarketID]*Market
}

// resolveBinary loads the binary markets named in ids (one Read; none:
// no Read).
func (s *Server) resolveBinary(lm *listMarkets, ids []core.MarketID) *APIError {
	if len(ids) == 0 {
		return nil
	}
	lm.bin = make(map[core.MarketID]*Market, 1)
	err := s.backend.Read(func(p *core.Processor, _ *History) error {
		for _, id := range ids {
			if _, done := lm.bin[id]; done {
				continue
			}
			v, ok := p.Binary(id)
			if !ok {
				continue
			}
			a, ok := s.reg.AssetByID(v.Cfg.Quote)
			if !ok {
				a = Asset{ID: v.Cfg.Quote, Symbol: "#" + strconv.Itoa(int(v.Cfg.Quote))}
			}
			lm.bin[id] = &Market{ID: id, Symbol: strconv.Itoa(int(id)), Quote: a, Base: Asset{Symbol: "SHARE"}}
		}
		return nil
	})
	if err != nil {
		return s.backendError(err)
	}
	return nil
}

// listMarket is the Market of a row: lm's when the row is binary.
func (s *Server) listMarket(lm *listMarkets, id core.MarketID, binary bool) (*Market, bool) {
	if binary {
		m, ok := lm.bin[id]
		return m, ok
	}
	return s.reg.MarketByID(id)
}

// binaryOpenOrders appends user's resting orders in the binary markets of
// q (every one when q.Market is 0) to st.views, already in the orders' own
// terms (Outcome set: Side and Price as placed).
func (s *Server) binaryOpenOrders(p *core.Processor, q *HistoryQuery, st *reqState) {
	for id := core.MarketID(1); id <= core.MaxMarkets; id++ {
		if q.Market != 0 && id != q.Market {
			continue
		}
		bv, ok := p.Binary(id)
		if !ok {
			continue
		}
		n := len(st.views)
		st.views = p.OpenOrders(id, q.User, st.views)
		for i := n; i < len(st.views); i++ {
			o := &st.views[i]
			o.Side, o.Price = ownTerms(o.Outcome, o.Side, o.Price, bv.Payout)
		}
	}
}

// userTradeSide is t from user's side: the order, its own side, price and
// fee, whether it was the maker, and its outcome (0 on spot).
func userTradeSide(t *UserTrade, user core.UserID) (order core.OrderID, side core.Side, price core.Price,
	fee core.Units, maker bool, out core.Outcome) {
	if t.TakerUser == user {
		price = t.Price
		if t.TakerOutcome != 0 {
			price = t.TakerPrice
		}
		return t.TakerOrder, t.TakerSide, price, t.TakerFee, false, t.TakerOutcome
	}
	price = t.Price
	if t.MakerOutcome != 0 {
		price = t.MakerPrice
	}
	return t.MakerOrder, t.MakerSide(), price, t.MakerFee, true, t.MakerOutcome
}
