package gateway

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// POST /api/v1/order. The answer is built from the command's own events
// (no read of the state): the order as this command left it, with the fills
// it made as the taker.
func (s *Server) postOrder(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	var m *Market
	var err *APIError
	if st.cmd, m, err = parseOrder(st.body, s.reg, st); err != nil {
		return err
	}
	if m == nil {
		return s.postBinaryOrder(ctx, st, st.vals[:len(orderSchema)])
	}
	c := &st.cmd
	c.User = core.UserID(st.claims.UserID)
	res, evs, err := s.submit(st, c)
	if err != nil {
		return err
	}
	switch {
	case res.Code == core.OK:
	case res.Code == core.CodeDuplicateClientOrderID && res.OrderID != 0:
		// The core names the live order holding this client_order_id:
		// answer with it, so a retried request gets what the first one made.
		found, err := s.lookupOrder(st, res.OrderID)
		if err != nil {
			return err
		}
		if !found {
			return coreError(res.Code)
		}
		return s.replyOrder(ctx, st, true, true)
	default:
		return coreError(res.Code)
	}
	r := &st.rec
	*r = OrderRecord{ID: res.OrderID, User: c.User, Time: res.Time, Market: c.Market, Side: c.Side, Type: c.Type, TIF: c.TIF,
		Status: res.Status, Price: c.Price, Qty: c.Qty, QuoteQty: c.QuoteQty, Filled: res.Qty, ClientID: c.Key}
	if c.Type == core.Market {
		r.TIF = core.IOC
	}
	st.fills = st.fills[:0]
	for i := range evs {
		e := &evs[i]
		if e.Kind != core.EvTrade || e.OtherOrderID != res.OrderID {
			continue
		}
		if len(st.fills) == MaxFillsPerOrder {
			r.FillsTruncated = true
			break
		}
		st.fills = append(st.fills, Fill{TradeID: e.TradeID, Time: e.Time, Price: e.Price, Qty: e.Qty,
			Fee: e.Fee2, Maker: e.OrderID, Taker: e.OtherOrderID})
	}
	r.Fills = st.fills
	st.out = appendOrder(st.out[:0], r, m, true, false)
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// GET /api/v1/order/{id}: another user's order is 404, as a missing one.
func (s *Server) getOrder(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	id, ok := parseUserID(bstr(st.params[0]))
	if !ok {
		return coreError(core.CodeOrderNotFound)
	}
	if ok, err := s.binaryOrderOf(ctx, st, core.OrderID(id)); ok || err != nil {
		return err // a resting order of a binary market (binary.go)
	}
	found, err := s.lookupOrder(st, core.OrderID(id))
	if err != nil {
		return err
	}
	if !found {
		return coreError(core.CodeOrderNotFound)
	}
	return s.replyOrder(ctx, st, true, false)
}

// DELETE /api/v1/order/{id}.
func (s *Server) cancelOrder(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	id, ok := parseUserID(bstr(st.params[0]))
	if !ok {
		return coreError(core.CodeOrderNotFound)
	}
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	st.cmd = core.Command{Kind: core.KindCancelOrder, User: core.UserID(st.claims.UserID), OrderID: core.OrderID(id)}
	c := &st.cmd
	res, evs, err := s.submit(st, c)
	if err != nil {
		return err
	}
	if res.Code == core.CodeOrderNotFound {
		return s.notOpen(ctx, st, c.OrderID, "cancelled")
	}
	if res.Code != core.OK {
		return coreError(res.Code)
	}
	if ok, err := s.binaryCancelled(ctx, st, res, evs); ok || err != nil {
		return err // a binary market's order (binary.go)
	}
	found, err := s.lookupOrder(st, c.OrderID)
	if err != nil {
		return err
	}
	if !found { // History dropped it already: what the events say
		st.rec = OrderRecord{ID: c.OrderID, User: c.User, Status: core.StatusCancelled, Filled: res.Qty,
			Partial: true, FillsTruncated: res.Qty > 0}
		for i := range evs {
			if e := &evs[i]; e.Kind == core.EvOrderCancelled && e.OrderID == c.OrderID {
				st.rec.Market, st.rec.Side, st.rec.Qty = e.Market, e.Side, res.Qty+e.Qty
			}
		}
		st.rec.Fills = st.fills[:0]
	}
	return s.replyOrder(ctx, st, true, false)
}

// PATCH /api/v1/order/{id} {price?, quantity?}: the body is checked first,
// then the order's market is read for the scales, then the core decides.
func (s *Server) modifyOrder(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	id, ok := parseUserID(bstr(st.params[0]))
	if !ok {
		return coreError(core.CodeOrderNotFound)
	}
	v := st.vals[:len(modifySchema)]
	var err *APIError
	if st.scratch, err = decodeObject(st.body, modifySchema, v, st.scratch); err != nil {
		return err
	}
	user := core.UserID(st.claims.UserID)
	var mid core.MarketID
	binary := false
	if rerr := s.backend.Read(func(p *core.Processor, _ *History) error {
		if o, ok := p.Order(core.OrderID(id)); ok && o.User == user {
			mid, binary = o.Market, o.Outcome != 0
		}
		return nil
	}); rerr != nil {
		return s.backendError(rerr)
	}
	if binary {
		return coreError(core.CodeNotSupported) // the core's answer: a binary order is cancelled and placed again
	}
	m, ok := s.reg.MarketByID(mid)
	if !ok { // not live, not this user's, or unknown market
		return s.notOpen(ctx, st, core.OrderID(id), "modified")
	}
	price, qty, err := parseModify(v, m)
	if err != nil {
		return err
	}
	st.cmd = core.Command{Kind: core.KindModifyOrder, User: user, OrderID: core.OrderID(id), Market: m.ID,
		Price: price, Qty: qty}
	c := &st.cmd
	res, _, err := s.submit(st, c)
	if err != nil {
		return err
	}
	if res.Code == core.CodeOrderNotFound { // it finished since it was read
		return s.notOpen(ctx, st, c.OrderID, "modified")
	}
	if res.Code != core.OK {
		return coreError(res.Code)
	}
	found, err := s.lookupOrder(st, c.OrderID)
	if err != nil {
		return err
	}
	if !found {
		st.rec = OrderRecord{ID: c.OrderID, User: user, Market: m.ID, Status: res.Status, Filled: res.Qty,
			Partial: true, FillsTruncated: res.Qty > 0, Fills: st.fills[:0]}
	}
	return s.replyOrder(ctx, st, true, false)
}

// notOpen answers a cancel or modify the core refused with ORDER_NOT_FOUND:
// the caller's order that exists but is no longer open (GET shows it
// FILLED, CANCELLED or EXPIRED) is 409 ORDER_NOT_OPEN with the order beside
// the code; an order that does not exist, or is another user's, stays 404.
func (s *Server) notOpen(ctx *fasthttp.RequestCtx, st *reqState, id core.OrderID, verb string) *APIError {
	found, err := s.lookupOrder(st, id)
	if err != nil {
		return err
	}
	if !found || st.rec.Live() {
		return coreError(core.CodeOrderNotFound)
	}
	m, ok := s.reg.MarketByID(st.rec.Market)
	if !ok && st.rec.Market == 0 {
		return coreError(core.CodeOrderNotFound)
	}
	b := append(st.out[:0], `{"code":"`+CodeOrderNotOpen+`","message":`...)
	b = appendStr(b, "the order is "+statusName(st.rec.Status)+"; only an open order can be "+verb)
	b = append(b, `,"order":`...)
	if ok {
		b = appendOrder(b, &st.rec, m, true, false)
	} else {
		b = s.appendBinaryRecord(b, &st.rec) // a binary market's order: as its GET answers it (binary.go)
	}
	st.out = append(b, '}')
	s.reply(ctx, st, http.StatusConflict)
	if s.rej != nil {
		s.rej.Rejected(CodeOrderNotOpen)
	}
	return nil
}

// lookupOrder loads the caller's order id into st.rec (its fills copied to
// st.fills): a live order from the core (authoritative) with History's
// fills, else a finished one from History, else from the Archive — only
// for an id below History's floor: above it, an order History does not
// hold does not exist — and only once the archive has persisted the seq
// History reports for that floor (else 503: retry). Another user's order
// is reported as not found.
func (s *Server) lookupOrder(st *reqState, id core.OrderID) (bool, *APIError) {
	user := core.UserID(st.claims.UserID)
	found, known := false, false // known: the core or History holds it (whoever owns it), or it does not exist
	var archiveSeq core.Seq      // the archive answers for id once it has persisted this seq (Floor.OrderSeq)
	st.fills = st.fills[:0]
	err := s.backend.Read(func(p *core.Processor, h *History) error {
		known = h.floorSet && id >= h.floor
		archiveSeq = h.belowSeq
		hr, inHist := h.Order(id)
		if o, ok := p.Order(id); ok {
			known = true
			if o.User != user {
				return nil
			}
			found = true
			st.rec = liveRecord(&o)
			if inHist {
				st.fills = append(st.fills, hr.Fills...)
				st.rec.FillsTruncated, st.rec.Time = hr.FillsTruncated, hr.Time
			}
			return nil
		}
		known = known || inHist
		if inHist && hr.User == user {
			found = true
			st.rec = hr
			st.fills = append(st.fills, hr.Fills...)
		}
		return nil
	})
	if err != nil {
		return false, s.backendError(err)
	}
	if !known && s.standbyReads() {
		return false, s.primaryOnly("an order older than this node's in-memory window")
	}
	if !known && s.archive != nil {
		// Before the archive reaches archiveSeq, its "not found" proves
		// nothing: the order may have finished in a command it has not
		// persisted yet (after a restart: one History never saw placed).
		if aerr := s.awaitArchive(archiveSeq); aerr != nil {
			return false, aerr
		}
		r, ok, err := s.archive.Order(id)
		if err != nil {
			s.log.Error("gateway: order archive", "order_id", uint64(id), "err", err)
			return false, Unavailable(CodeServiceUnavailable, "the order archive is unavailable")
		}
		if ok && r.User == user && r.ID == id {
			found = true
			st.rec = r
			st.fills = append(st.fills, r.Fills...)
		}
	}
	st.rec.Fills = st.fills
	return found, nil
}

// replyOrder writes st.rec as the answer.
func (s *Server) replyOrder(ctx *fasthttp.RequestCtx, st *reqState, withFills, duplicate bool) *APIError {
	m, ok := s.reg.MarketByID(st.rec.Market)
	if !ok && st.rec.Market != 0 {
		return s.binaryRecordReply(ctx, st) // a binary market's finished order (binary.go)
	}
	if !ok {
		s.log.Error("gateway: order of an unregistered market", "order_id", uint64(st.rec.ID), "market", uint32(st.rec.Market))
		return &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
	}
	st.out = appendOrder(st.out[:0], &st.rec, m, withFills, duplicate)
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// noBody accepts an empty body or {} on endpoints that take no input.
func (s *Server) noBody(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	body := st.body
	if len(body) == 0 {
		return nil
	}
	var err *APIError
	st.scratch, err = decodeObject(body, emptySchema, st.vals[:0], st.scratch)
	return err
}
