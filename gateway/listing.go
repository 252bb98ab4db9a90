package gateway

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// GET /api/v1/orders (the order history) and GET /api/v1/my-trades (the
// caller's fills), the conventions of Binance's allOrders and myTrades:
// newest first, an optional market, a time range in unix milliseconds
// (start_time, end_time, inclusive: when the order was placed, when the
// trade happened), limit, and a cursor (next_cursor of the previous page:
// the listing continues below that id). Recent pages come from History,
// older ones from the Archive (history_user.go says when each is complete).

// Limits of the listings.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1_000
	// historyArchiveWait bounds how long a page that needs the archive
	// waits for it to catch up with the floor's seq (the sink's lag,
	// normally well under a second) before answering 503 (retry).
	historyArchiveWait = 2 * time.Second
)

// HistoryQuery selects a user's orders or trades, newest first.
type HistoryQuery struct {
	User     core.UserID
	Market   core.MarketID      // 0: every market
	Statuses []core.OrderStatus // orders: the statuses wanted (empty: all)
	Before   uint64             // ids below this only
	From, To int64              // unix ns, inclusive; 0 = unbounded (a bound excludes unknown times)
	Limit    int
}

// matchOrder reports whether r is selected by q (its id aside).
func (q *HistoryQuery) matchOrder(r *OrderRecord) bool {
	return (q.Market == 0 || r.Market == q.Market) && (len(q.Statuses) == 0 || slices.Contains(q.Statuses, r.Status)) &&
		q.inTime(r.Time)
}

func (q *HistoryQuery) inTime(t int64) bool {
	return (q.From == 0 || (t != 0 && t >= q.From)) && (q.To == 0 || (t != 0 && t <= q.To))
}

// statusFilters are the values of ?status=.
var statusFilters = map[string][]core.OrderStatus{
	"open":      {core.StatusNew, core.StatusPartiallyFilled},
	"all":       nil,
	"filled":    {core.StatusFilled},
	"cancelled": {core.StatusCancelled},
	"expired":   {core.StatusExpired},
}

// parseHistoryQuery reads market, start_time, end_time, limit and cursor.
func (s *Server) parseHistoryQuery(ctx *fasthttp.RequestCtx, st *reqState) (HistoryQuery, *APIError) {
	args := ctx.QueryArgs()
	q := HistoryQuery{User: core.UserID(st.claims.UserID), Before: NoFloor, Limit: DefaultListLimit}
	if q.User == 0 {
		panic("gateway: user 0 would list every user's history") // Authenticate never yields 0
	}
	if mv := args.Peek("market"); len(mv) > 0 {
		if m, ok := s.reg.MarketBytes(mv); ok {
			q.Market = m.ID
		} else if id, ok := s.binaryMarketID(mv); ok { // a binary market, by its id
			q.Market = id
		} else {
			return q, coreError(core.CodeInvalidMarket)
		}
	}
	var err *APIError
	if q.Limit, err = parseLimit(ctx, DefaultListLimit, MaxListLimit); err != nil {
		return q, err
	}
	num := func(name string) (uint64, bool, *APIError) {
		v := args.Peek(name)
		if len(v) == 0 {
			return 0, false, nil
		}
		n, ok := parseUserID(bstr(v))
		if !ok {
			return 0, false, BadRequest(CodeInvalidParameter, name+" must be a positive integer")
		}
		return n, true, nil
	}
	if c, set, err := num("cursor"); err != nil {
		return q, err
	} else if set {
		q.Before = c
	}
	const maxMs = uint64(math.MaxInt64/1_000_000) - 1 // the year 2262: still an int64 of ns, end_time's 999_999 included
	for _, b := range []struct {
		name string
		dst  *int64
	}{{"start_time", &q.From}, {"end_time", &q.To}} {
		ms, set, err := num(b.name)
		if err != nil {
			return q, err
		}
		if set {
			if ms > maxMs {
				return q, BadRequest(CodeInvalidParameter, b.name+" is out of range (unix milliseconds)")
			}
			*b.dst = int64(ms) * 1_000_000
		}
	}
	if q.To != 0 {
		q.To += 999_999 // end_time is inclusive to the millisecond
	}
	if q.From != 0 && q.To != 0 && q.To < q.From {
		return q, BadRequest(CodeInvalidParameter, "end_time is before start_time")
	}
	return q, nil
}

// GET /api/v1/orders?status=open|all|filled|cancelled|expired&market=&start_time=&end_time=&limit=&cursor=:
// {"orders":[...], "next_cursor": "id"|null}, newest placed first, no fills.
// status defaults to open (the orders resting now, from the core).
func (s *Server) listOrders(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	sv := strings.ToLower(string(ctx.QueryArgs().Peek("status")))
	if sv == "" {
		sv = "open"
	}
	statuses, ok := statusFilters[sv]
	if !ok {
		return BadRequest(CodeInvalidParameter, "status must be open, all, filled, cancelled or expired")
	}
	q, err := s.parseHistoryQuery(ctx, st)
	if err != nil {
		return err
	}
	q.Statuses = statuses
	st.recs = st.recs[:0]
	if sv == "open" {
		err = s.openOrders(&q, st)
	} else {
		err = s.orderHistory(&q, st)
	}
	if err != nil {
		return err
	}
	var lm listMarkets
	var bin []core.MarketID
	for i := range st.recs {
		if st.recs[i].Outcome != 0 {
			bin = append(bin, st.recs[i].Market)
		}
	}
	if err := s.resolveBinary(&lm, bin); err != nil {
		return err
	}
	b := append(st.out[:0], `{"orders":[`...)
	n := 0
	for i := range st.recs {
		m, ok := s.listMarket(&lm, st.recs[i].Market, st.recs[i].Outcome != 0)
		if !ok {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendOrder(b, &st.recs[i], m, false, false)
	}
	b = append(b, `],"next_cursor":`...)
	st.out = appendCursor(b, len(st.recs) == q.Limit, func() uint64 { return uint64(st.recs[len(st.recs)-1].ID) })
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// appendCursor writes next_cursor: the last listed id when the page is
// full (there may be more), else null.
func appendCursor(b []byte, full bool, last func() uint64) []byte {
	if !full {
		return append(b, "null}"...)
	}
	b = append(b, '"')
	b = strconv.AppendUint(b, last(), 10)
	return append(b, `"}`...)
}

// openOrders loads the caller's resting orders into st.recs: the core's
// (authoritative, complete), with History's placement times.
func (s *Server) openOrders(q *HistoryQuery, st *reqState) *APIError {
	st.views = st.views[:0]
	err := s.backend.Read(func(p *core.Processor, h *History) error {
		for i := range s.reg.markets {
			if q.Market == 0 || s.reg.markets[i].ID == q.Market {
				st.views = p.OpenOrders(s.reg.markets[i].ID, q.User, st.views)
			}
		}
		s.binaryOpenOrders(p, q, st)
		slices.SortFunc(st.views, func(a, b core.OrderView) int { return cmpDesc(uint64(a.ID), uint64(b.ID)) })
		for i := range st.views {
			if uint64(st.views[i].ID) >= q.Before {
				continue
			}
			r := liveRecord(&st.views[i])
			r.Outcome = st.views[i].Outcome // binary: already in its own terms (binaryOpenOrders)
			if hr, ok := h.Order(r.ID); ok {
				r.Time = hr.Time
			}
			if q.inTime(r.Time) {
				st.recs = append(st.recs, r)
				if len(st.recs) == q.Limit {
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		return s.backendError(err)
	}
	return nil
}

// cmpDesc orders ids newest (largest) first.
func cmpDesc(a, b uint64) int { return cmp.Compare(b, a) }

// orderHistory loads a page of the caller's orders into st.recs: those
// above History's floor from memory, then, if the page is not full, older
// ones from the archive once it has caught up with the floor. Without an
// archive it lists what History holds.
func (s *Server) orderHistory(q *HistoryQuery, st *reqState) *APIError {
	var fl Floor
	err := s.backend.Read(func(_ *core.Processor, h *History) error {
		fl = h.Floors()
		h.UserOrders(q.User, func(r *OrderRecord) bool {
			if uint64(r.ID) >= q.Before || (s.archive != nil && r.ID < fl.Order) {
				return true // newer than the page, or the archive's part
			}
			if q.matchOrder(r) {
				st.recs = append(st.recs, *r)
				st.recs[len(st.recs)-1].Fills = nil // History's memory: not listed, not kept
			}
			return s.archive == nil || len(st.recs) < q.Limit
		})
		return nil
	})
	if err != nil {
		return s.backendError(err)
	}
	if s.archive == nil { // History's records only, in id order
		slices.SortFunc(st.recs, func(a, b OrderRecord) int { return cmpDesc(uint64(a.ID), uint64(b.ID)) })
		st.recs = st.recs[:min(len(st.recs), q.Limit)]
		// A standby: the page reaches below History's complete part (a
		// short page, or one ending on a seeded record below the floor),
		// where the primary's archive has the orders it lacks.
		full := len(st.recs) == q.Limit && uint64(st.recs[len(st.recs)-1].ID) >= uint64(fl.Order)
		if s.standbyReads() && !full && min(q.Before, uint64(fl.Order)) > 1 {
			return s.primaryOnly("order history older than this node's in-memory window (orders below id " +
				strconv.FormatUint(uint64(fl.Order), 10) + ")")
		}
		return nil
	}
	below := min(q.Before, uint64(fl.Order))
	if len(st.recs) == q.Limit || below <= 1 {
		return nil
	}
	if err := s.awaitArchive(fl.OrderSeq); err != nil {
		return err
	}
	aq := *q
	aq.Before, aq.Limit = below, q.Limit-len(st.recs)
	recs, aerr := s.archive.Orders(aq, st.recs)
	if aerr != nil {
		s.log.Error("gateway: order history archive", "err", aerr)
		return Unavailable(CodeServiceUnavailable, "the order archive is unavailable; retry")
	}
	st.recs = recs
	return nil
}

// awaitArchive waits until the archive has persisted seq (bounded).
func (s *Server) awaitArchive(seq core.Seq) *APIError { return s.awaitSeq(s.archive.PersistedSeq, seq) }

// awaitSeq waits until persisted() reaches seq (bounded by archiveWait).
func (s *Server) awaitSeq(persisted func() core.Seq, seq core.Seq) *APIError {
	if !awaitPersisted(context.Background(), persisted, seq, s.archiveWait) {
		return Unavailable(CodeServiceUnavailable, "older history is still being written to the archive; retry")
	}
	return nil
}

// awaitPersisted waits until persisted() reaches seq, at most wait (and
// not past ctx); it reports whether it did.
func awaitPersisted(ctx context.Context, persisted func() core.Seq, seq core.Seq, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for persisted() < seq {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// GET /api/v1/my-trades?market=&start_time=&end_time=&limit=&cursor=:
// {"trades":[{"trade_id","order_id","market","side","price","quantity",
// "quote_quantity","fee","fee_asset","is_maker","time"}], "next_cursor"},
// the caller's fills, newest first (a trade with the caller on both sides
// is listed once, as the taker's).
func (s *Server) myTrades(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	q, err := s.parseHistoryQuery(ctx, st)
	if err != nil {
		return err
	}
	st.utrades = st.utrades[:0]
	var fl Floor
	rerr := s.backend.Read(func(_ *core.Processor, h *History) error {
		fl = h.Floors()
		h.UserTrades(q.User, func(t *UserTrade) bool {
			if t.ID < q.Before && (q.Market == 0 || t.Market == q.Market) && q.inTime(t.Time) {
				st.utrades = append(st.utrades, *t)
			}
			return len(st.utrades) < q.Limit
		})
		return nil
	})
	if rerr != nil {
		return s.backendError(rerr)
	}
	if below := min(q.Before, fl.Trade); s.archive != nil && len(st.utrades) < q.Limit && below > 1 {
		if err := s.awaitArchive(fl.TradeSeq); err != nil {
			return err
		}
		aq := q
		aq.Before, aq.Limit = below, q.Limit-len(st.utrades)
		ts, aerr := s.archive.Trades(aq, st.utrades)
		if aerr != nil {
			s.log.Error("gateway: my-trades archive", "err", aerr)
			return Unavailable(CodeServiceUnavailable, "the trade archive is unavailable; retry")
		}
		st.utrades = ts
	} else if s.standbyReads() && len(st.utrades) < q.Limit && below > 1 {
		return s.primaryOnly("trade history older than this node's in-memory window (trades below id " +
			strconv.FormatUint(fl.Trade, 10) + ")")
	}
	var lm listMarkets
	var bin []core.MarketID
	for i := range st.utrades {
		if st.utrades[i].TakerOutcome != 0 {
			bin = append(bin, st.utrades[i].Market)
		}
	}
	if err := s.resolveBinary(&lm, bin); err != nil {
		return err
	}
	b := append(st.out[:0], `{"trades":[`...)
	n := 0
	for i := range st.utrades {
		t := &st.utrades[i]
		m, ok := s.listMarket(&lm, t.Market, t.TakerOutcome != 0)
		if !ok {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendUserTrade(b, t, q.User, m)
	}
	b = append(b, `],"next_cursor":`...)
	st.out = appendCursor(b, len(st.utrades) == q.Limit, func() uint64 { return st.utrades[len(st.utrades)-1].ID })
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// appendUserTrade writes t from user's side. A binary market's fill
// (outcome set) is in the user's own outcome's terms: its side and price,
// and quote_quantity = that price x shares.
func appendUserTrade(b []byte, t *UserTrade, user core.UserID, m *Market) []byte {
	order, side, price, fee, maker, out := userTradeSide(t, user)
	quote := t.Quote
	if out != 0 {
		quote = core.Units(price) * t.Qty // a binary leg's notional (the core checked it fits)
	}
	b = append(b, `{"trade_id":`...)
	b = appendUint(b, t.ID)
	b = append(b, `,"order_id":`...)
	b = appendUint(b, uint64(order))
	b = append(b, `,"market":`...)
	b = appendStr(b, m.Symbol)
	if out != 0 {
		b = append(b, `,"outcome":`...)
		b = appendStr(b, out.String())
	}
	b = append(b, `,"side":`...)
	b = appendNameOrNull(b, side.String())
	b = append(b, `,"price":`...)
	b = appendUnitsStr(b, int64(price), m.Quote.Scale)
	b = append(b, `,"quantity":`...)
	b = appendUnitsStr(b, int64(t.Qty), m.Base.Scale)
	b = append(b, `,"quote_quantity":`...)
	b = appendUnitsStr(b, int64(quote), m.Quote.Scale)
	b = append(b, `,"fee":`...)
	b = appendUnitsStr(b, int64(fee), m.Quote.Scale)
	b = append(b, `,"fee_asset":`...)
	b = appendStr(b, m.Quote.Symbol)
	b = append(b, `,"is_maker":`...)
	b = appendBool(b, maker)
	b = append(b, `,"time":`...)
	b = appendUint(b, uint64(t.Time/1_000_000))
	return append(b, '}')
}
