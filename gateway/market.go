package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// fundingReadTimeout bounds the Postgres read of FUNDING balances in GET /balances.
const fundingReadTimeout = 2 * time.Second

// parseLimit reads the optional ?limit= parameter: a canonical integer in
// 1..max, def when absent.
func parseLimit(ctx *fasthttp.RequestCtx, def, max int) (int, *APIError) {
	v := ctx.QueryArgs().Peek("limit")
	if len(v) == 0 {
		return def, nil
	}
	n, ok := parseUserID(bstr(v))
	if !ok || n > uint64(max) {
		return 0, BadRequest(CodeInvalidParameter, "limit must be an integer from 1 to "+FormatUnits(int64(max), 0))
	}
	return int(n), nil
}

// pathMarket resolves the {market} path parameter.
func (s *Server) pathMarket(st *reqState) (*Market, *APIError) {
	m, ok := s.reg.MarketBytes(st.params[0])
	if !ok {
		return nil, coreError(core.CodeInvalidMarket)
	}
	return m, nil
}

// GET /api/v1/depth/{market}?limit=: {"market","seq","bids":[[price,qty]...],"asks":[...]},
// best levels first; seq is the last command the view reflects.
func (s *Server) depth(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if o := ctx.QueryArgs().Peek("outcome"); o != nil {
		return s.binaryDepth(ctx, st, o) // ?outcome=YES|NO: a binary market by id (binary.go)
	}
	m, err := s.pathMarket(st)
	if err != nil {
		return err
	}
	limit, err := parseLimit(ctx, DefaultDepthLimit, MaxDepthLimit)
	if err != nil {
		return err
	}
	var seq core.Seq
	found := false
	rerr := s.backend.Read(func(p *core.Processor, _ *History) error {
		st.bids, st.asks, found = p.Depth(m.ID, limit, st.bids[:0], st.asks[:0])
		seq = p.LastSeq()
		return nil
	})
	if rerr != nil {
		return s.backendError(rerr)
	}
	if !found {
		return coreError(core.CodeInvalidMarket) // registered but not configured in the core
	}
	b := append(st.out[:0], `{"market":`...)
	b = appendStr(b, m.Symbol)
	b = append(b, `,"seq":`...)
	b = appendUint(b, uint64(seq))
	b = append(b, `,"bids":`...)
	b = appendLevels(b, st.bids, m)
	b = append(b, `,"asks":`...)
	b = appendLevels(b, st.asks, m)
	st.out = append(b, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

func appendLevels(b []byte, lv []core.PriceLevel, m *Market) []byte {
	b = append(b, '[')
	for i := range lv {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendUnitsStr(b, int64(lv[i].Price), m.Quote.Scale)
		b = append(b, ',')
		b = appendUnitsStr(b, int64(lv[i].Qty), m.Base.Scale)
		b = append(b, ']')
	}
	return append(b, ']')
}

// GET /api/v1/trades/{market}?limit=: the most recent public trades, newest
// first: {"market","trades":[{"trade_id","price","quantity","taker_side","time"}]}
// (time in unix milliseconds). No user or order ids: they are private.
func (s *Server) trades(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	m, err := s.pathMarket(st)
	if err != nil {
		return err
	}
	limit, err := parseLimit(ctx, DefaultTradesLimit, MaxTradesPerMarket)
	if err != nil {
		return err
	}
	rerr := s.backend.Read(func(_ *core.Processor, h *History) error {
		st.trades = h.Trades(m.ID, limit, st.trades[:0])
		return nil
	})
	if rerr != nil {
		return s.backendError(rerr)
	}
	b := append(st.out[:0], `{"market":`...)
	b = appendStr(b, m.Symbol)
	b = append(b, `,"trades":[`...)
	for i := range st.trades {
		t := &st.trades[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"trade_id":`...)
		b = appendUint(b, t.ID)
		b = append(b, `,"price":`...)
		b = appendUnitsStr(b, int64(t.Price), m.Quote.Scale)
		b = append(b, `,"quantity":`...)
		b = appendUnitsStr(b, int64(t.Qty), m.Base.Scale)
		b = append(b, `,"taker_side":`...)
		b = appendNameOrNull(b, t.TakerSide.String())
		b = append(b, `,"time":`...)
		b = appendUint(b, uint64(t.Time/1_000_000))
		b = append(b, '}')
	}
	st.out = append(b, "]}"...)
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// GET /api/v1/balances: every registered asset, zero or not, in id order:
// {"balances":[{"asset":"BTC","spot":{"available":"..","frozen":".."}}]}.
func (s *Server) balances(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	user := core.UserID(st.claims.UserID)
	assets := s.reg.assets
	var bal [core.MaxAssets + 1]core.Balance
	err := s.backend.Read(func(p *core.Processor, _ *History) error {
		for _, a := range assets {
			bal[a.ID] = p.BalanceOf(user, a.ID)
		}
		return nil
	})
	if err != nil {
		return s.backendError(err)
	}
	// FUNDING lives in Postgres: when it cannot be read, SPOT is still
	// served, with "funding": null and the reason beside.
	var funding map[core.AssetID]model.AccountState
	fundingErr := ""
	// A standby has no FUNDING ledger (Postgres, the primary's): each
	// "funding" is null and "funding_error" NOT_PRIMARY, never an absent
	// field a client would read as "no FUNDING account". Its SPOT trails
	// the primary's: beside the primary's FUNDING it could show the money
	// of an internal transfer in both accounts.
	standby := s.transfers == nil && s.standbyReads()
	if standby {
		fundingErr = CodeNotPrimary
	}
	if s.transfers != nil {
		c, cancel := context.WithTimeout(context.Background(), fundingReadTimeout)
		var ferr error
		funding, ferr = s.transfers.FundingBalances(c, user)
		cancel()
		if ferr != nil {
			s.log.Warn("gateway: funding balances unavailable", "user_id", uint64(user), "err", ferr)
			fundingErr = "FUNDING_UNAVAILABLE"
		}
	}
	b := append(st.out[:0], `{"balances":[`...)
	for i, a := range assets {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"asset":`...)
		b = appendStr(b, a.Symbol)
		b = append(b, `,"spot":{"available":`...)
		b = appendUnitsStr(b, int64(bal[a.ID].Avail), a.Scale)
		b = append(b, `,"frozen":`...)
		b = appendUnitsStr(b, int64(bal[a.ID].Frozen), a.Scale)
		b = append(b, '}')
		if s.transfers != nil || standby {
			b = append(b, `,"funding":`...)
			if fundingErr != "" {
				b = append(b, "null"...)
			} else {
				f := funding[a.ID]
				b = append(b, `{"available":`...)
				b = appendUnitsStr(b, int64(f.Available), a.Scale)
				b = append(b, `,"status":`...)
				b = appendNameOrNull(b, string(f.Status))
				b = append(b, '}')
			}
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if fundingErr != "" {
		b = append(b, `,"funding_error":"`...)
		b = append(b, fundingErr...)
		b = append(b, '"')
	}
	st.out = append(b, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}
