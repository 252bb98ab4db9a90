package gateway

import (
	"bytes"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/logging"
)

// The transfer endpoints of spec 003 (p2p.go has the service's config,
// codes, error body and amounts).

// POST /transfers
var p2pTransferSchema = []jsonField{{"fromUserId", jsonString | jsonNullable}, {"toUserId", jsonString | jsonNullable},
	{"amount", jsonP2PAmount | jsonNullable}, {"requestId", jsonString | jsonNullable}}

// postP2PTransfer: spec §3.3.1's checks in order — fields present
// (fromUserId, toUserId, amount; null is absent), the handles' format, not
// to self, amount >= one unit, at most the scale's decimals; then the sender
// (a non-admin: 403 unless it is the caller's own handle, whether or not it
// exists; an admin: SENDER_NOT_FOUND), the recipient, and the core
// (INSUFFICIENT_BALANCE, limits). A repeated requestId answers the first transfer.
func (s *Server) postP2PTransfer(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(p2pTransferSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(st.body, p2pTransferSchema, v, st.scratch); err != nil {
		return err
	}
	for i, f := range p2pTransferSchema[:3] {
		if !v[i].set {
			return BadRequest(CodeMissingField, "Missing required field: "+f.name)
		}
	}
	if !core.ValidP2PHandle(bstr(v[0].b)) || !core.ValidP2PHandle(bstr(v[1].b)) {
		return BadRequest(CodeInvalidUserID, "Invalid userId format")
	}
	if bytes.Equal(v[0].b, v[1].b) {
		return p2pCoreError(core.CodeSelfTransfer)
	}
	cfg := s.p2p
	amt, why := parseP2PAmount(v[2].b, cfg.Scale)
	switch why {
	case amtFormat, amtNegative, amtZero, amtTooSmall:
		return BadRequest(CodeInvalidAmount, "Amount must be at least "+FormatUnits(1, cfg.Scale))
	case amtDecimals:
		return decimalsError(cfg.Scale)
	}
	c := &st.cmd
	*c = core.Command{Kind: core.KindP2PTransfer, Asset: cfg.Asset, Amount: core.Units(amt), Qty: core.Units(cfg.Hold)}
	if v[3].set {
		k, ok := parseKey(v[3].b)
		if !ok {
			return BadRequest(CodeInvalidKey, "requestId must be 1-32 printable ASCII characters")
		}
		c.Key = k
	}
	from, fromOK, to, toOK, err2 := s.p2pResolve(v[0].b, v[1].b)
	if err2 != nil {
		return s.backendError(err2)
	}
	// A non-admin may act only as its own handle, and learns nothing about
	// others: one that does not exist answers like one that does (403).
	switch {
	case !st.claims.Admin && (!fromOK || uint64(from) != st.claims.UserID):
		return Forbidden("fromUserId must be the caller")
	case !fromOK:
		return p2pCoreError(core.CodeSenderNotFound)
	case !toOK:
		return p2pCoreError(core.CodeRecipientNotFound)
	}
	c.User, c.OrderID = from, core.OrderID(to)
	res, evs, aerr := s.submit(st, c)
	if aerr != nil {
		return aerr
	}
	if res.Code != core.OK {
		s.log.Warn("Transfer refused", "fromUserId", bstr(v[0].b), "toUserId", bstr(v[1].b),
			"amount", FormatUnits(amt, cfg.Scale), "code", res.Code.String())
		return p2pCoreError(res.Code)
	}
	var t core.P2PTransfer
	for i := range evs {
		if e := &evs[i]; e.Kind == core.EvP2PTransfer {
			t = core.P2PTransfer{ID: uint64(e.OrderID), Amount: e.Amount, Status: core.P2PStatus(e.Detail),
				ExecuteAt: int64(e.Price), CreatedAt: e.Time}
			if e.Flags == 1 { // a repeated requestId: the first transfer as it is now
				if err := s.backend.Read(func(p *core.Processor, _ *History) error {
					t, _ = p.P2PTransferByID(uint64(e.OrderID))
					return nil
				}); err != nil {
					return s.backendError(err)
				}
			}
		}
	}
	if t.Status == core.P2PPending && t.CreatedAt == res.Time {
		logging.Attrs(s.log, slog.LevelInfo, "Transfer created", slog.Uint64("transferId", t.ID),
			slog.String("fromUserId", bstr(v[0].b)), slog.String("toUserId", bstr(v[1].b)),
			slog.String("amount", FormatUnits(amt, cfg.Scale)), slog.String("status", "PENDING"))
	}
	o := append(st.out[:0], `{"transferId":`...)
	o = appendUint(o, t.ID)
	o = append(o, `,"fromUserId":`...)
	o = appendStrBytes(o, v[0].b)
	o = append(o, `,"toUserId":`...)
	o = appendStrBytes(o, v[1].b)
	o = append(o, `,"amount":`...)
	o = AppendUnits(o, int64(t.Amount), cfg.Scale)
	o = append(o, `,"status":`...)
	o = appendStr(o, t.Status.String())
	o = append(o, `,"createdAt":`...)
	o = appendTime(o, t.CreatedAt)
	o = append(o, `,"executeAt":`...)
	o = appendTime(o, t.ExecuteAt)
	st.out = append(o, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// listP2PTransfers: GET /transfers?userId=&page=&size= (§3.4): userId
// required and 3..50 long, page >= 1 (default 1), 1 <= size <= 100 (default
// 10), newest first, the user as sender or recipient.
func (s *Server) listP2PTransfers(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	args := ctx.QueryArgs()
	h := args.Peek("userId")
	if h == nil {
		return BadRequest(CodeMissingField, "Missing required field: userId")
	}
	if len(h) < core.MinP2PHandleLen || len(h) > core.MaxP2PHandleLen {
		return BadRequest(CodeInvalidUserID, "Invalid userId format")
	}
	page, size := 1, defaultP2PPageSize
	for _, q := range [...]struct {
		name string
		dst  *int
		max  int
	}{{"page", &page, 1 << 30}, {"size", &size, MaxP2PPageSize}} {
		if b := args.Peek(q.name); b != nil {
			n, err := strconv.Atoi(string(b))
			if err != nil || n < 1 || n > q.max {
				return BadRequest(CodeInvalidPagination, "Invalid pagination parameters")
			}
			*q.dst = n
		}
	}
	type row struct {
		t        core.P2PTransfer
		from, to string
	}
	var rows []row
	total, held := 0, true
	var viewSeq core.Seq
	var aerr *APIError
	if err := s.backend.Read(func(p *core.Processor, _ *History) error {
		u, ok, e := ownHandle(p, st.claims, h)
		if e != nil || !ok {
			aerr = e
			return nil
		}
		var ts []core.P2PTransfer
		ts, total, held = p.P2PHistory(u.ID, (page-1)*size, size, nil)
		viewSeq = p.LastSeq()
		for _, t := range ts {
			f, _ := p.P2PUserByID(t.From)
			to, _ := p.P2PUserByID(t.To)
			rows = append(rows, row{t, f.Handle, to.Handle})
		}
		return nil
	}); err != nil {
		return s.backendError(err)
	}
	if aerr != nil {
		return aerr
	}
	if !held { // the page reaches transfers the core forgot: all of it from the archive, once it has caught up with the view
		arch := s.p2p.Archive
		if arch == nil {
			return Unavailable(CodeServiceUnavailable, "older transfers are not available")
		}
		if err := s.awaitSeq(arch.PersistedSeq, viewSeq); err != nil {
			return err
		}
		if err := arch.P2PTransfers(string(h), (page-1)*size, size, func(t core.P2PTransfer, from, to string) {
			rows = append(rows, row{t, from, to})
		}); err != nil {
			s.log.Error("gateway: transfer history archive", "err", err)
			return Unavailable(CodeServiceUnavailable, "the transfer archive is unavailable; retry")
		}
	}
	sc := s.p2p.Scale
	o := append(st.out[:0], `{"content":[`...)
	for i, r := range rows {
		if i > 0 {
			o = append(o, ',')
		}
		o = append(o, `{"transferId":`...)
		o = appendUint(o, r.t.ID)
		o = append(o, `,"fromUserId":`...)
		o = appendStr(o, r.from)
		o = append(o, `,"toUserId":`...)
		o = appendStr(o, r.to)
		o = append(o, `,"amount":`...)
		o = AppendUnits(o, int64(r.t.Amount), sc)
		o = append(o, `,"status":`...)
		o = appendStr(o, r.t.Status.String())
		o = append(o, `,"createdAt":`...)
		o = appendTime(o, r.t.CreatedAt)
		o = append(o, `,"completedAt":`...)
		done := int64(0)
		if r.t.Status == core.P2PCompleted {
			done = r.t.DoneAt
		}
		o = appendTimeOrNull(o, done)
		o = append(o, `,"executeAt":`...)
		o = appendTime(o, r.t.ExecuteAt)
		if r.t.Status == core.P2PCancelled {
			o = append(o, `,"cancelledAt":`...)
			o = appendTime(o, r.t.DoneAt)
		}
		if r.t.Status == core.P2PDebitFailed {
			o = append(o, `,"failureReason":`...)
			o = appendStr(o, r.t.Reason.String())
		}
		o = append(o, '}')
	}
	o = append(o, `],"page":`...)
	o = strconv.AppendInt(o, int64(page), 10)
	o = append(o, `,"size":`...)
	o = strconv.AppendInt(o, int64(size), 10)
	o = append(o, `,"totalElements":`...)
	o = strconv.AppendInt(o, int64(total), 10)
	o = append(o, `,"totalPages":`...)
	o = strconv.AppendInt(o, int64((total+size-1)/size), 10)
	st.out = append(o, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// cancelP2PTransfer: POST /transfers/{transferId}/cancel (§3.5): not found
// (404), not the sender nor an admin (403), not PENDING
// (CANNOT_CANCEL_TRANSFER, the message naming its status), at or after
// executeAt (CANCEL_WINDOW_EXPIRED). The core decides the last two. What a
// caller cannot see answers like what does not exist: a transfer it neither
// sent nor receives is 404 TRANSFER_NOT_FOUND; its recipient may see it
// (GET /transfers), so it gets 403.
func (s *Server) cancelP2PTransfer(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	notFound := &APIError{Status: http.StatusNotFound, Code: CodeTransferNotFound, Message: "Transfer not found"}
	id, ok := parseUserID(bstr(st.params[0]))
	if !ok {
		return notFound
	}
	var aerr *APIError
	if err := s.backend.Read(func(p *core.Processor, _ *History) error {
		t, ok := p.P2PTransferByID(id)
		caller := core.UserID(st.claims.UserID)
		switch {
		case !ok, !st.claims.Admin && t.From != caller && t.To != caller:
			aerr = notFound
		case !st.claims.Admin && t.From != caller:
			aerr = Forbidden("only the sender or an admin may cancel a transfer")
		}
		return nil
	}); err != nil {
		return s.backendError(err)
	}
	if aerr != nil {
		return aerr
	}
	c := &st.cmd
	*c = core.Command{Kind: core.KindP2PCancel, User: core.UserID(st.claims.UserID), OrderID: core.OrderID(id)}
	if st.claims.Admin {
		c.Flags = core.P2PCancelAdmin
	}
	res, _, aerr := s.submit(st, c)
	if aerr != nil {
		return aerr
	}
	if res.Code == core.CodeCannotCancelTransfer {
		var t core.P2PTransfer
		_ = s.backend.Read(func(p *core.Processor, _ *History) error {
			t, _ = p.P2PTransferByID(id)
			return nil
		})
		return BadRequest(res.Code.String(), cannotCancelMessage(t.Status))
	}
	if res.Code != core.OK {
		return p2pCoreError(res.Code)
	}
	s.log.Info("Transfer cancelled", "transferId", id, "status was", "PENDING")
	o := append(st.out[:0], `{"transferId":`...)
	o = appendUint(o, id)
	o = append(o, `,"status":"CANCELLED","cancelledAt":`...)
	o = appendTime(o, res.Time)
	st.out = append(o, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// p2pResolve returns the user ids of two handles: from the cache of
// handles (a handle, once created, names the same id forever, so a cached
// answer is never stale), else from one read of the view, whose answers
// it caches. Reads wait for the view's seq to be durable, which under load
// costs a group commit: the cache keeps POST /transfers at one (its own).
// The cache holds at most core.MaxP2PUsers entries.
func (s *Server) p2pResolve(a, b []byte) (ua core.UserID, okA bool, ub core.UserID, okB bool, err error) {
	if v, ok := s.p2pIDs.Load(bstr(a)); ok {
		ua, okA = v.(core.UserID), true
	}
	if v, ok := s.p2pIDs.Load(bstr(b)); ok {
		ub, okB = v.(core.UserID), true
	}
	if okA && okB {
		return
	}
	err = s.backend.Read(func(p *core.Processor, _ *History) error {
		for _, h := range [2]struct {
			b  []byte
			id *core.UserID
			ok *bool
		}{{a, &ua, &okA}, {b, &ub, &okB}} {
			if *h.ok {
				continue
			}
			if u, found := p.P2PUserByHandle(bstr(h.b)); found {
				*h.id, *h.ok = u.ID, true
				s.p2pIDs.Store(string(h.b), u.ID)
			}
		}
		return nil
	})
	return
}

// cannotCancelMessage is spec §3.5's message for each status.
func cannotCancelMessage(s core.P2PStatus) string {
	switch s {
	case core.P2PCompleted:
		return "Cannot cancel completed transfer"
	case core.P2PDebitFailed:
		return "Cannot cancel failed transfer"
	case core.P2PCancelled:
		return "Transfer already cancelled"
	}
	return "Cannot cancel transfer in " + s.String() + " status"
}
