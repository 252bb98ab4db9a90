package gateway

import (
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// Admin endpoints (/admin/v1, admin role). Every applied action is logged
// at Info with the acting admin's user id: an audit trail beside the WAL.

// POST /admin/v1/adjust {user_id, asset, amount, ref, balance?}: a signed
// adjustment of a user's available balance (or, with "balance": "frozen",
// of the frozen one: the operator's repair of frozen funds no order holds),
// idempotent by ref; accepted while the core is halted (an audited repair). A repeat with the same
// parameters gets the first result again ("repeat": true when it was
// applied, the first error otherwise); other parameters are 409
// REQ_ID_CONFLICT.
func (s *Server) adjust(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	var a Asset
	var err *APIError
	if st.cmd, a, err = parseAdjust(st.body, s.reg, st); err != nil {
		return err
	}
	c := &st.cmd
	res, evs, err := s.submit(st, c)
	if err != nil {
		return err
	}
	repeat := false
	for i := range evs {
		if evs[i].Kind == core.EvTransfer && evs[i].Flags&1 != 0 {
			repeat = true
		}
	}
	s.log.Info("gateway: admin adjust", "admin", st.claims.UserID, "user_id", uint64(c.User), "asset", a.Symbol,
		"amount", FormatUnits(int64(c.Amount), a.Scale), "ref", c.Key.String(), "repeat", repeat, "code", res.Code.String())
	if res.Code != core.OK {
		e := coreError(res.Code)
		if repeat {
			e = &APIError{Status: e.Status, Code: e.Code, Message: e.Message + " (the first result of this ref)"}
		}
		return e
	}
	b := append(st.out[:0], `{"user_id":`...)
	b = appendUint(b, uint64(c.User))
	b = append(b, `,"asset":`...)
	b = appendStr(b, a.Symbol)
	b = append(b, `,"amount":`...)
	b = appendUnitsStr(b, int64(c.Amount), a.Scale)
	b = append(b, `,"ref":`...)
	b = appendClientID(b, &c.Key)
	b = append(b, `,"repeat":`...)
	b = appendBool(b, repeat)
	if c.Flags&core.AdjustFrozen != 0 {
		b = append(b, `,"balance":"frozen"`...)
	}
	st.out = append(b, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// POST /admin/v1/markets/{market}/halt ({market}: a spot symbol or a binary
// market's id, on resume and breaker/resolve too): a breaker trip with reason
// MANUAL_HALT by this admin: no new orders, cancels or modifies until
// resolved; queries still served. Halting a halted market is a no-op.
func (s *Server) halt(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	return s.marketAction(ctx, st, core.KindHaltMarket, "HALTED")
}

// POST /admin/v1/markets/{market}/resume: lifted only if the core's full
// invariant check passes (409 INVARIANT_VIOLATION otherwise; 409 NOT_HALTED
// if it was not halted).
func (s *Server) resume(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	return s.marketAction(ctx, st, core.KindResumeMarket, "ACTIVE")
}

func (s *Server) marketAction(ctx *fasthttp.RequestCtx, st *reqState, kind core.Kind, status string) *APIError {
	id, name, err := s.opMarket(st.params[0])
	if err != nil {
		return err
	}
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	st.cmd = core.Command{Kind: kind, Market: id, User: core.UserID(st.claims.UserID)}
	res, _, err := s.submit(st, &st.cmd)
	if err != nil {
		return err
	}
	s.log.Info("gateway: admin market action", "admin", st.claims.UserID, "action", kind.String(),
		"market", name, "code", res.Code.String())
	if res.Code != core.OK {
		return coreError(res.Code)
	}
	// A resolved or voided binary market leaves a halt back to settling,
	// not to ACTIVE: answer the status the market is in now. The command is
	// applied: if the view cannot be read, the status it implies stands.
	_ = s.backend.Read(func(p *core.Processor, _ *History) error {
		if v, ok := p.Market(id); ok {
			status = v.Status.String()
		}
		return nil
	})
	b := append(st.out[:0], `{"market":`...)
	b = appendStr(b, name)
	b = append(b, `,"status":`...)
	b = appendStr(b, status)
	st.out = append(b, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// opMarket resolves an operator's {market}: a spot market by its symbol or
// a binary market by its id ("20"). Binary markets are created at run time,
// so the Registry never holds them: the core is asked. Anything else (a
// spot market's id too: one name per market) is INVALID_MARKET.
func (s *Server) opMarket(name []byte) (core.MarketID, string, *APIError) {
	if m, ok := s.reg.MarketBytes(name); ok {
		return m.ID, m.Symbol, nil
	}
	id, ok := parseBinaryID(name)
	if !ok {
		return 0, "", coreError(core.CodeInvalidMarket)
	}
	bin := false
	if err := s.backend.Read(func(p *core.Processor, _ *History) error {
		_, bin = p.Binary(id)
		return nil
	}); err != nil {
		return 0, "", s.backendError(err)
	}
	if !bin {
		return 0, "", coreError(core.CodeInvalidMarket)
	}
	return id, strconv.FormatUint(uint64(id), 10), nil
}

// POST /admin/v1/accounts/{user_id}/status {status: ACTIVE|FROZEN|DISABLED}.
func (s *Server) accountStatus(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	u, ok := parseUserID(bstr(st.params[0]))
	if !ok {
		return BadRequest(CodeInvalidUser, "user_id must be a positive integer")
	}
	v := st.vals[:len(statusSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(st.body, statusSchema, v, st.scratch); err != nil {
		return err
	}
	if !v[0].set {
		return missing("status")
	}
	status, ok := parseAccountStatus(v[0].b)
	if !ok {
		return BadRequest(CodeInvalidStatus, "status must be ACTIVE, FROZEN or DISABLED")
	}
	st.cmd = core.Command{Kind: core.KindSetAccountStatus, User: core.UserID(u), Status: status}
	res, _, err := s.submit(st, &st.cmd)
	if err != nil {
		return err
	}
	s.log.Info("gateway: admin account status", "admin", st.claims.UserID, "user_id", u,
		"status", status.String(), "code", res.Code.String())
	if res.Code != core.OK {
		return coreError(res.Code)
	}
	b := append(st.out[:0], `{"user_id":`...)
	b = appendUint(b, u)
	b = append(b, `,"status":`...)
	b = appendStr(b, status.String())
	st.out = append(b, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// GET /admin/v1/fees: the fee account (user 0), where every trade's maker
// and taker fees are credited, per registered asset in id order:
// {"user_id":0,"fees":[{"asset","available","frozen"}]} (decimal strings).
func (s *Server) fees(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	var bal [core.MaxAssets + 1]core.Balance
	if err := s.backend.Read(func(p *core.Processor, _ *History) error {
		for _, a := range s.reg.assets {
			bal[a.ID] = p.BalanceOf(0, a.ID)
		}
		return nil
	}); err != nil {
		return s.backendError(err)
	}
	b := append(st.out[:0], `{"user_id":0,"fees":[`...)
	for i, a := range s.reg.assets {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"asset":`...)
		b = appendStr(b, a.Symbol)
		b = append(b, `,"available":`...)
		b = appendUnitsStr(b, int64(bal[a.ID].Avail), a.Scale)
		b = append(b, `,"frozen":`...)
		b = appendUnitsStr(b, int64(bal[a.ID].Frozen), a.Scale)
		b = append(b, '}')
	}
	st.out = append(b, "]}"...)
	s.reply(ctx, st, http.StatusOK)
	return nil
}
