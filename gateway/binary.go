package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// Binary YES/NO markets (issue 22) over HTTP. They are created at run time,
// so they are not in the Registry: a binary market is named by its core
// market id ("7"), its money is in its quote asset (a registered asset, so
// prices and amounts are decimals at that asset's scale) and its quantities
// are whole shares. Prices are in the order's own outcome's terms; the book
// terms (book_side, book_price: the YES book) are given beside them.

// POST /admin/v1/binary-markets
var binaryCreateSchema = []jsonField{{"market_id", jsonNumber}, {"quote", jsonString}, {"payout", jsonMoney},
	{"lot", jsonNumber}, {"min_quantity", jsonNumber}, {"max_quantity", jsonNumber}, {"maker_fee_ppm", jsonNumber},
	{"taker_fee_ppm", jsonNumber}, {"close_time_ms", jsonNumber}, {"question", jsonString}}

const (
	bcMarket = iota
	bcQuote
	bcPayout
	bcLot
	bcMin
	bcMax
	bcMaker
	bcTaker
	bcClose
	bcQuestion
)

// POST /admin/v1/binary-markets/{market}/{action}
var binaryActionSchema = []jsonField{{"outcome", jsonString}, {"limit", jsonNumber}}

// binaryView is the JSON of a binary market.
type binaryView struct {
	MarketID  uint32      `json:"market_id"`
	Status    string      `json:"status"`
	Question  string      `json:"question"` // "" only for a market created before questions
	Outcome   string      `json:"outcome,omitempty"`
	Settling  bool        `json:"settling"`
	Quote     string      `json:"quote"`
	Payout    string      `json:"payout"`
	Tick      string      `json:"tick"`
	Lot       int64       `json:"lot"`
	CloseMs   int64       `json:"close_time_ms,omitempty"`
	Reserve   string      `json:"reserve"`
	PnlPool   string      `json:"pnl_pool"`
	YesShares int64       `json:"yes_shares"`
	NoShares  int64       `json:"no_shares"`
	Positions int         `json:"positions"`
	Yes       binaryQuote `json:"yes"`
	No        binaryQuote `json:"no"`
	Seq       uint64      `json:"seq"`
	Processed *int64      `json:"processed,omitempty"` // settle / resolve / void: orders and positions handled
	HaltedFor string      `json:"halt_reason,omitempty"`
}

type binaryQuote struct {
	Bid *string `json:"bid"`
	Ask *string `json:"ask"`
}

type binaryFill struct {
	TradeID  uint64 `json:"trade_id"`
	Kind     string `json:"kind"`
	Price    string `json:"price"` // the order's own outcome's price
	Quantity int64  `json:"quantity"`
	Fee      string `json:"fee"`
}

// binaryOrderJ is the JSON of a binary order.
type binaryOrderJ struct {
	OrderID   uint64       `json:"order_id"`
	Market    string       `json:"market"`
	Outcome   string       `json:"outcome"`
	Side      string       `json:"side"`
	Price     string       `json:"price"`
	Quantity  int64        `json:"quantity"`
	Filled    int64        `json:"filled"`
	Status    string       `json:"status"`
	BookType  string       `json:"book_type"`
	BookSide  string       `json:"book_side"`
	BookPrice string       `json:"book_price"`
	Frozen    string       `json:"frozen,omitempty"`
	Fills     []binaryFill `json:"fills,omitempty"`
}

// binaryInfo is what a handler needs about a binary market: its view and
// its quote asset.
func (s *Server) binaryInfo(id core.MarketID) (core.BinaryView, Asset, uint64, *APIError) {
	var v core.BinaryView
	var ok bool
	var seq uint64
	if err := s.backend.Read(func(p *core.Processor, _ *History) error {
		v, ok = p.Binary(id)
		seq = uint64(p.LastSeq())
		return nil
	}); err != nil {
		return v, Asset{}, 0, s.backendError(err)
	}
	if !ok {
		return v, Asset{}, 0, coreError(core.CodeNotBinary)
	}
	a, ok := s.reg.AssetByID(v.Cfg.Quote)
	if !ok {
		a = Asset{ID: v.Cfg.Quote, Symbol: "#" + strconv.Itoa(int(v.Cfg.Quote))}
	}
	return v, a, seq, nil
}

func binaryJSON(v core.BinaryView, a Asset, seq uint64) binaryView {
	px := func(p core.Price) *string {
		if p == 0 {
			return nil
		}
		s := FormatUnits(int64(p), a.Scale)
		return &s
	}
	out := binaryView{MarketID: uint32(v.ID), Status: v.Status.String(), Question: v.Question, Settling: v.Settling,
		Quote: a.Symbol, Payout: FormatUnits(int64(v.Payout), a.Scale), Tick: FormatUnits(int64(v.Cfg.Tick), a.Scale),
		Lot: int64(v.Cfg.Lot), CloseMs: v.CloseTime / 1e6, Reserve: FormatUnits(int64(v.Reserve), a.Scale),
		PnlPool: FormatUnits(int64(v.PnlPool), a.Scale), YesShares: int64(v.YesShares), NoShares: int64(v.NoShares),
		Positions: v.Positions, Yes: binaryQuote{px(v.YesBid), px(v.YesAsk)}, No: binaryQuote{px(v.NoBid), px(v.NoAsk)},
		Seq: seq}
	if v.Outcome != 0 {
		out.Outcome = v.Outcome.String()
	}
	if v.HaltReason != core.ReasonNone {
		out.HaltedFor = v.HaltReason.String()
	}
	return out
}

func parseBinaryID(b []byte) (core.MarketID, bool) {
	v, ok := parseUint(b)
	return core.MarketID(v), ok && v > 0 && v <= core.MaxMarkets
}

// POST /admin/v1/binary-markets {market_id, quote, question, payout?, lot?,
// min_quantity?, max_quantity?, maker_fee_ppm?, taker_fee_ppm?,
// close_time_ms?}: a binary market in DRAFT (payout defaults to one whole
// quote unit, lot and min_quantity to 1 share, max_quantity to 1,000,000
// shares, fees to 0). question is required: 1..core.MaxQuestionLen bytes of
// UTF-8 without control characters (core.ValidQuestion), stored as given
// (not trimmed); a bad one is INVALID_QUESTION (400), missing MISSING_FIELD.
func (s *Server) createBinary(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(binaryCreateSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(st.body, binaryCreateSchema, v, st.scratch); err != nil {
		return err
	}
	if !v[bcMarket].set {
		return missing("market_id")
	}
	id, ok := parseBinaryID(v[bcMarket].b)
	if !ok {
		return coreError(core.CodeInvalidMarket)
	}
	if !v[bcQuote].set {
		return missing("quote")
	}
	a, ok := s.reg.AssetBytes(v[bcQuote].b)
	if !ok {
		return coreError(core.CodeInvalidAsset)
	}
	if !v[bcQuestion].set {
		return missing("question")
	}
	q := v[bcQuestion].b
	if len(q) == 0 || len(q) > core.MaxQuestionLen || !core.ValidQuestion(bstr(q)) {
		return coreError(core.CodeInvalidQuestion) // the core refuses it too; checked here so nothing is sequenced
	}
	c := core.Command{Kind: core.KindConfigBinary, Market: id, Cfg: core.MarketCfg{Quote: a.ID, Lot: 1, MinQty: 1,
		MaxQty: 1_000_000}, Text: string(q)}
	if v[bcPayout].set {
		p, perr := ParseUnits(bstr(v[bcPayout].b), a.Scale)
		if perr != nil {
			return perr.(*APIError)
		}
		c.Amount = core.Units(p)
	}
	nums := []struct {
		i   int
		dst *int64
	}{{bcLot, (*int64)(&c.Cfg.Lot)}, {bcMin, (*int64)(&c.Cfg.MinQty)}, {bcMax, (*int64)(&c.Cfg.MaxQty)},
		{bcMaker, (*int64)(&c.Cfg.MakerFee)}, {bcTaker, (*int64)(&c.Cfg.TakerFee)}}
	for _, n := range nums {
		if v[n.i].set {
			x, ok := parseUint(v[n.i].b)
			if !ok || x > 1<<62 {
				return BadRequest(core.CodeInvalidMarketConfig.String(), binaryCreateSchema[n.i].name+" must be a non-negative integer")
			}
			*n.dst = int64(x)
		}
	}
	if v[bcClose].set {
		ms, ok := parseUint(v[bcClose].b)
		if !ok || ms > (1<<62)/1_000_000 {
			return BadRequest(core.CodeInvalidMarketConfig.String(), "close_time_ms must be unix milliseconds")
		}
		c.Price = core.Price(ms * 1_000_000)
	}
	res, _, err := s.submit(st, &c)
	if err != nil {
		return err
	}
	s.log.Info("gateway: admin create binary market", "admin", st.claims.UserID, "market", uint32(id),
		"code", res.Code.String())
	if res.Code != core.OK {
		return coreError(res.Code)
	}
	if c.Kind == core.KindArchive { // the market is gone from the core
		return s.replyJSON(ctx, st, http.StatusOK, map[string]any{"market_id": uint32(id), "status": "ARCHIVED"})
	}
	bv, qa, seq, err := s.binaryInfo(id)
	if err != nil {
		return err
	}
	return s.replyJSON(ctx, st, http.StatusOK, binaryJSON(bv, qa, seq))
}

// POST /admin/v1/binary-markets/{market}/{activate|suspend|resume|resolve|settle|void|archive}:
// resolve takes {"outcome": "YES"|"NO"}; settle takes {"limit": N} (orders
// and positions in this slice, default and most core.MaxSettleSlice);
// archive releases the slot of a market whose settlement is done (SETTLED,
// or VOIDED and no longer settling): its id may be listed again, so
// core.MaxMarkets bounds the markets alive at once, not every market ever
// listed (the market's rows stay in Postgres; the answer is
// {"market_id", "status": "ARCHIVED"}).
func (s *Server) binaryAction(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	id, ok := parseBinaryID(st.params[0])
	if !ok {
		return coreError(core.CodeInvalidMarket)
	}
	v := st.vals[:len(binaryActionSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(orEmpty(st.body), binaryActionSchema, v, st.scratch); err != nil {
		return err
	}
	c := core.Command{Market: id, User: core.UserID(st.claims.UserID)}
	switch string(st.params[1]) {
	case "activate":
		c.Kind = core.KindActivate
	case "suspend":
		c.Kind = core.KindSuspendMarket
	case "resume":
		c.Kind = core.KindResumeMarket
	case "void":
		c.Kind = core.KindVoid
	case "archive":
		c.Kind = core.KindArchive
	case "resolve":
		c.Kind = core.KindResolve
		if !v[0].set {
			return missing("outcome")
		}
		out, ok := parseOutcome(v[0].b)
		if !ok {
			return coreError(core.CodeInvalidOutcome)
		}
		c.Flags = uint8(out)
	case "settle":
		c.Kind, c.Qty = core.KindSettle, core.MaxSettleSlice
		if v[1].set {
			n, ok := parseUint(v[1].b)
			if !ok || n < 1 || n > core.MaxSettleSlice {
				return BadRequest(CodeInvalidQuantity, "limit must be 1.."+strconv.Itoa(core.MaxSettleSlice))
			}
			c.Qty = core.Units(n)
		}
	default:
		return &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such action"}
	}
	if (v[0].set && c.Kind != core.KindResolve) || (v[1].set && c.Kind != core.KindSettle) {
		return BadRequest(CodeUnknownField, "this action takes no such field")
	}
	if c.Kind != core.KindResumeMarket {
		if _, _, _, err := s.binaryInfo(id); err != nil { // resume also serves spot markets: not here
			return err
		}
	}
	res, _, err := s.submit(st, &c)
	if err != nil {
		return err
	}
	s.log.Info("gateway: admin binary market action", "admin", st.claims.UserID, "market", uint32(id),
		"action", string(st.params[1]), "code", res.Code.String())
	if res.Code != core.OK {
		return coreError(res.Code)
	}
	if c.Kind == core.KindArchive { // the market is gone from the core
		return s.replyJSON(ctx, st, http.StatusOK, map[string]any{"market_id": uint32(id), "status": "ARCHIVED"})
	}
	bv, qa, seq, err := s.binaryInfo(id)
	if err != nil {
		return err
	}
	out := binaryJSON(bv, qa, seq)
	if c.Kind == core.KindSettle || c.Kind == core.KindResolve || c.Kind == core.KindVoid {
		n := int64(res.Qty)
		out.Processed = &n
	}
	return s.replyJSON(ctx, st, http.StatusOK, out)
}

func orEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

func parseOutcome(b []byte) (core.Outcome, bool) {
	switch string(b) {
	case "YES":
		return core.OutcomeYes, true
	case "NO":
		return core.OutcomeNo, true
	}
	return 0, false
}

// GET /api/v1/binary-markets/{market}: status, outcome, reserve, pnl pool,
// shares outstanding, best bid/ask of YES and of NO (own terms).
func (s *Server) getBinary(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	id, ok := parseBinaryID(st.params[0])
	if !ok {
		return coreError(core.CodeInvalidMarket)
	}
	bv, a, seq, err := s.binaryInfo(id)
	if err != nil {
		return err
	}
	return s.replyJSON(ctx, st, http.StatusOK, binaryJSON(bv, a, seq))
}

type positionJ struct {
	MarketID   uint32 `json:"market_id"`
	Quote      string `json:"quote"`
	YesVolume  int64  `json:"yes_volume"`
	NoVolume   int64  `json:"no_volume"`
	YesPending int64  `json:"yes_pending_sell"`
	NoPending  int64  `json:"no_pending_sell"`
	YesCostSum string `json:"yes_cost_sum"`
	NoCostSum  string `json:"no_cost_sum"`
}

// GET /api/v1/positions: the caller's positions in every binary market.
func (s *Server) positions(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	user := core.UserID(st.claims.UserID)
	out := struct {
		Positions []positionJ `json:"positions"`
		Seq       uint64      `json:"seq"`
	}{Positions: []positionJ{}}
	if err := s.backend.Read(func(p *core.Processor, _ *History) error {
		for _, ps := range p.Positions(user, nil) {
			mv, _ := p.Market(ps.Market)
			a, _ := s.reg.AssetByID(mv.Cfg.Quote)
			out.Positions = append(out.Positions, positionJ{MarketID: uint32(ps.Market), Quote: a.Symbol,
				YesVolume: int64(ps.YesVolume), NoVolume: int64(ps.NoVolume), YesPending: int64(ps.YesPending),
				NoPending: int64(ps.NoPending), YesCostSum: FormatUnits(int64(ps.YesCostSum), a.Scale),
				NoCostSum: FormatUnits(int64(ps.NoCostSum), a.Scale)})
		}
		out.Seq = uint64(p.LastSeq())
		return nil
	}); err != nil {
		return s.backendError(err)
	}
	return s.replyJSON(ctx, st, http.StatusOK, out)
}

// postBinaryOrder is POST /api/v1/order with "outcome": market is the binary
// market's id, price a decimal in the quote asset (the outcome's own terms),
// quantity whole shares. v are the decoded members of orderSchema.
func (s *Server) postBinaryOrder(ctx *fasthttp.RequestCtx, st *reqState, v []jsonValue) *APIError {
	if !v[ofMarket].set {
		return missing("market")
	}
	id, ok := parseBinaryID(v[ofMarket].b)
	if !ok {
		return coreError(core.CodeInvalidMarket)
	}
	out, ok := parseOutcome(v[ofOutcome].b)
	if !ok {
		return coreError(core.CodeInvalidOutcome)
	}
	bv, a, _, err := s.binaryInfo(id)
	if err != nil {
		return err
	}
	c := core.Command{Kind: core.KindPlaceOrder, Market: id, User: core.UserID(st.claims.UserID), Flags: uint8(out),
		Type: core.Limit}
	if err := orderSide(&c, v[ofSide]); err != nil {
		return err
	}
	if v[ofType].set && string(v[ofType].b) != "LIMIT" {
		return coreError(core.CodeNotSupported)
	}
	if err := orderTIF(&c, v[ofTIF]); err != nil {
		return err
	}
	if !v[ofPrice].set {
		return missing("price")
	}
	p, perr := ParseUnits(bstr(v[ofPrice].b), a.Scale)
	if perr != nil {
		return perr.(*APIError)
	}
	c.Price = core.Price(p)
	if !v[ofQty].set {
		return missing("quantity")
	}
	q, ok := parseUint(v[ofQty].b)
	if !ok || q == 0 || q > 1<<62 {
		return coreError(core.CodeInvalidQuantity)
	}
	c.Qty = core.Units(q)
	if v[ofQuoteQty].set {
		return BadRequest(CodeInvalidQuantity, "quote_quantity is not for binary markets")
	}
	if err := orderKey(&c, v[ofClientID]); err != nil {
		return err
	}
	st.cmd = c
	res, evs, err := s.submit(st, &st.cmd)
	if err != nil {
		return err
	}
	if res.Code != core.OK {
		return coreError(res.Code)
	}
	o := binaryOrderJ{OrderID: uint64(res.OrderID), Market: strconv.Itoa(int(id)), Outcome: out.String(),
		Side: c.Side.String(), Price: FormatUnits(int64(c.Price), a.Scale), Quantity: int64(c.Qty),
		Filled: int64(res.Qty), Status: statusName(res.Status)}
	bookSide, bookPrice := c.Side, c.Price
	o.BookType = "NATIVE"
	if out == core.OutcomeNo {
		bookSide, bookPrice, o.BookType = 3-c.Side, core.Price(bv.Payout)-c.Price, "SYNTHETIC"
	}
	o.BookSide, o.BookPrice = bookSide.String(), FormatUnits(int64(bookPrice), a.Scale)
	for i := range evs {
		e := &evs[i]
		if e.Kind == core.EvTrade && e.OtherOrderID == res.OrderID {
			own := e.Price
			if out == core.OutcomeNo {
				own = core.Price(bv.Payout) - e.Price
			}
			o.Fills = append(o.Fills, binaryFill{TradeID: e.TradeID, Kind: core.FillKind(e.Flags).String(),
				Price: FormatUnits(int64(own), a.Scale), Quantity: int64(e.Qty), Fee: FormatUnits(int64(e.Fee2), a.Scale)})
		}
		if e.Kind == core.EvOrderAccepted && e.OrderID == res.OrderID {
			o.Frozen = FormatUnits(int64(e.Amount), a.Scale)
			if c.Side == core.Sell {
				o.Frozen = strconv.FormatInt(int64(e.Amount), 10) // shares
			}
		}
	}
	return s.replyJSON(ctx, st, http.StatusOK, o)
}

// binaryOrderOf answers GET of a binary order while it rests (binary
// orders are not in the Registry's markets): from the core; ok false when
// id is not a resting binary order of this user.
func (s *Server) binaryOrderOf(ctx *fasthttp.RequestCtx, st *reqState, id core.OrderID) (bool, *APIError) {
	ov, err := s.restingBinary(st, id)
	if err != nil || ov.ID == 0 {
		return false, err
	}
	bv, a, _, err := s.binaryInfo(ov.Market)
	if err != nil {
		return false, err
	}
	return true, s.replyJSON(ctx, st, http.StatusOK, binaryOrderJSON(&ov, bv.Payout, a))
}

// restingBinary returns the caller's resting binary order id (ID 0 if id
// is not one).
func (s *Server) restingBinary(st *reqState, id core.OrderID) (core.OrderView, *APIError) {
	user := core.UserID(st.claims.UserID)
	var ov core.OrderView
	if err := s.backend.Read(func(p *core.Processor, _ *History) error {
		if o, live := p.Order(id); live && o.Outcome != 0 && o.User == user {
			ov = o
		}
		return nil
	}); err != nil {
		return core.OrderView{}, s.backendError(err)
	}
	return ov, nil
}

// binaryOrderJSON is the JSON of resting binary order ov (its Side and
// Price are the YES book's) in a market paying payout: the order's own
// side and price beside the book's.
func binaryOrderJSON(ov *core.OrderView, payout core.Units, a Asset) binaryOrderJ {
	o := binaryOrderJ{OrderID: uint64(ov.ID), Market: strconv.Itoa(int(ov.Market)), Outcome: ov.Outcome.String(),
		Side: ov.Side.String(), BookSide: ov.Side.String(), BookType: "NATIVE", Quantity: int64(ov.Qty),
		Filled: int64(ov.Filled), Status: "NEW"}
	own := ov.Price
	if ov.Outcome == core.OutcomeNo {
		o.Side, o.BookType, own = (3 - ov.Side).String(), "SYNTHETIC", core.Price(payout)-ov.Price
	}
	o.Price, o.BookPrice = FormatUnits(int64(own), a.Scale), FormatUnits(int64(ov.Price), a.Scale)
	if ov.Filled > 0 {
		o.Status = "PARTIALLY_FILLED"
	}
	return o
}

// binaryCancelled answers DELETE of a binary order the core cancelled (ok
// false when the cancelled order was not a binary one): the order as it
// was cancelled, like a spot order's answer — its own and book prices, its
// whole quantity and what it had filled — all from the cancel's events (a
// binary order's ORDER_CANCELLED carries its book price and the payout),
// so the cancel costs no read of the core before it. The one read after it
// only finds the quote asset's scale; should it fail, the order was still
// cancelled: the answer says so, without prices.
func (s *Server) binaryCancelled(ctx *fasthttp.RequestCtx, st *reqState, res *core.Event,
	evs []core.Event) (bool, *APIError) {
	var e *core.Event
	for i := range evs {
		if evs[i].Kind == core.EvOrderCancelled && evs[i].OrderID == res.OrderID && evs[i].Detail != 0 {
			e = &evs[i]
		}
	}
	if e == nil {
		return false, nil
	}
	ov := core.OrderView{ID: res.OrderID, User: e.User, Market: e.Market, Side: e.Side, Price: e.Price,
		Outcome: core.Outcome(e.Detail), Qty: res.Qty + e.Qty, Filled: res.Qty} // filled + the remainder cancelled
	_, a, _, err := s.binaryInfo(ov.Market)
	o := binaryOrderJSON(&ov, e.Payout, a)
	if err != nil {
		o.Price, o.BookPrice = "", ""
	}
	o.Status = "CANCELLED"
	return true, s.replyJSON(ctx, st, http.StatusOK, o)
}

// binaryDepth is GET /api/v1/depth/{market}?outcome=YES|NO: the outcome's
// view of binary market {market} (an id); NO mirrors the YES book.
func (s *Server) binaryDepth(ctx *fasthttp.RequestCtx, st *reqState, outcome []byte) *APIError {
	out, ok := parseOutcome(outcome)
	if !ok {
		return coreError(core.CodeInvalidOutcome)
	}
	id, ok := parseBinaryID(st.params[0])
	if !ok {
		return coreError(core.CodeInvalidMarket)
	}
	limit, err := parseLimit(ctx, DefaultDepthLimit, MaxDepthLimit)
	if err != nil {
		return err
	}
	var found bool
	var seq core.Seq
	var quote core.AssetID
	if rerr := s.backend.Read(func(p *core.Processor, _ *History) error {
		st.bids, st.asks, found = p.BinaryDepth(id, out, limit, st.bids[:0], st.asks[:0])
		v, _ := p.Market(id)
		quote, seq = v.Cfg.Quote, p.LastSeq()
		return nil
	}); rerr != nil {
		return s.backendError(rerr)
	}
	if !found {
		return coreError(core.CodeNotBinary)
	}
	a, _ := s.reg.AssetByID(quote)
	m := &Market{ID: id, Symbol: strconv.Itoa(int(id)), Quote: a, Base: Asset{Symbol: "SHARE"}}
	b := append(st.out[:0], `{"market":`...)
	b = appendStr(b, m.Symbol)
	b = append(b, `,"outcome":`...)
	b = appendStr(b, out.String())
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

// binaryRecordReply answers GET of a binary market's order that no longer
// rests, from History: its status, shares, outcome and its own side and
// price (History keeps them in the outcome's terms, issue 40).
func (s *Server) binaryRecordReply(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	return s.replyJSON(ctx, st, http.StatusOK, s.binaryRecordJSON(&st.rec))
}

// binaryRecordJSON is the JSON of a binary market's order History holds
// (GET, and the "order" of a 409 ORDER_NOT_OPEN). The price needs the
// market's quote asset: it is left out once the market is archived.
func (s *Server) binaryRecordJSON(r *OrderRecord) any {
	j := struct {
		OrderID  uint64 `json:"order_id"`
		Market   string `json:"market"`
		Outcome  string `json:"outcome,omitempty"`
		Side     string `json:"side,omitempty"`
		Price    string `json:"price,omitempty"` // the order's own outcome's price
		Status   string `json:"status"`
		Quantity int64  `json:"quantity"`
		Filled   int64  `json:"filled"`
	}{OrderID: uint64(r.ID), Market: strconv.Itoa(int(r.Market)), Status: statusName(r.Status),
		Quantity: int64(r.Qty), Filled: int64(r.Filled)}
	if r.Outcome != 0 {
		j.Outcome, j.Side = r.Outcome.String(), r.Side.String()
		if _, a, _, err := s.binaryInfo(r.Market); err == nil {
			j.Price = FormatUnits(int64(r.Price), a.Scale)
		}
	}
	return j
}

// appendBinaryRecord appends binaryRecordJSON(r).
func (s *Server) appendBinaryRecord(b []byte, r *OrderRecord) []byte {
	j, err := json.Marshal(s.binaryRecordJSON(r))
	if err != nil { // a struct of integers and strings: cannot fail
		panic("gateway: binary order JSON: " + err.Error())
	}
	return append(b, j...)
}
