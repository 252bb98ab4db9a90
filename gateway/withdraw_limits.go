package gateway

import (
	"context"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/withdraw"
)

// Withdrawal limits and allowlists per user (issue 33 item 6): admin only,
// every answer is the user's limits as GET shows them. Cold paths.

// WithdrawalLimits is the limits side of persist/withdraw.Service.
type WithdrawalLimits interface {
	Limits(ctx context.Context, user core.UserID) ([]withdraw.LimitView, []chaintx.Address, error)
	SetLimit(ctx context.Context, user core.UserID, asset string, l withdraw.Limit) error
	ClearLimit(ctx context.Context, user core.UserID, asset string) error
	AllowAddress(ctx context.Context, user core.UserID, address string) (chaintx.Address, error)
	DisallowAddress(ctx context.Context, user core.UserID, address string) error
}

var (
	limitSchema     = []jsonField{{"asset", jsonString}, {"daily_amount", jsonMoney}, {"daily_count", jsonNumber}}
	allowlistSchema = []jsonField{{"address", jsonString}}
)

// limitsUser is the route's {user_id}, with the service (nil: no limits wired).
func (s *Server) limitsUser(st *reqState) (WithdrawalLimits, core.UserID, *APIError) {
	if s.chain.Limits == nil {
		return nil, 0, errNotFound
	}
	u, ok := parseUserID(bstr(st.params[0]))
	if !ok {
		return nil, 0, BadRequest(CodeInvalidUser, "user_id must be a positive integer")
	}
	return s.chain.Limits, core.UserID(u), nil
}

// GET /admin/v1/users/{user_id}/withdrawal-limits:
// {"user_id", "limits": [{"asset", "daily_amount", "daily_count", "source": "default"|"user",
// "used_amount", "used_count"}], "allowlist": [addresses; empty: any]} (amounts: decimal
// strings, "0" and 0: no limit; used: today, UTC).
func (s *Server) getWithdrawalLimits(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	return s.limitsAnswer(ctx, st)
}

// POST /admin/v1/users/{user_id}/withdrawal-limits {asset, daily_amount, daily_count}:
// the user's own limit for the asset (overrides the flag default; 0 = no limit).
func (s *Server) setWithdrawalLimit(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(limitSchema)]
	var aerr *APIError
	if st.scratch, aerr = decodeObject(st.body, limitSchema, v, st.scratch); aerr != nil {
		return aerr
	}
	svc, u, aerr := s.limitsUser(st)
	if aerr != nil {
		return aerr
	}
	if !v[0].set || !v[1].set || !v[2].set {
		return BadRequest(CodeMissingField, "asset, daily_amount and daily_count are required")
	}
	a, ok := s.chain.Withdrawals.Asset(string(v[0].b))
	if !ok {
		return BadRequest(string(withdraw.CodeInvalidAsset), "asset cannot be withdrawn to a chain")
	}
	var l withdraw.Limit
	if string(v[1].b) != "0" {
		amount, err := ParseUnits(string(v[1].b), uint8(a.Scale))
		if err != nil || amount <= 0 {
			return BadRequest(CodeInvalidAmount, "daily_amount must be 0 (no limit) or a positive decimal with at most the asset's decimals")
		}
		l.Amount = core.Units(amount)
	}
	n, err := strconv.ParseInt(string(v[2].b), 10, 32)
	if err != nil || n < 0 {
		return BadRequest(CodeInvalidParameter, "daily_count must be an integer >= 0 (0 = no limit)")
	}
	l.Count = int(n)
	c, cancel := chainCtx()
	defer cancel()
	if err := svc.SetLimit(c, u, a.Symbol, l); err != nil {
		return s.chainError("set withdrawal limit", err)
	}
	s.log.Info("gateway: admin withdrawal limit", "admin", st.claims.UserID, "user_id", uint64(u), "asset", a.Symbol,
		"daily_amount", int64(l.Amount), "daily_count", l.Count)
	return s.limitsAnswer(ctx, st)
}

// DELETE /admin/v1/users/{user_id}/withdrawal-limits?asset=: the flag default applies again.
func (s *Server) clearWithdrawalLimit(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	return s.limitsChange(ctx, st, "asset", func(c context.Context, svc WithdrawalLimits, u core.UserID, arg string) error {
		return svc.ClearLimit(c, u, arg)
	})
}

// POST /admin/v1/users/{user_id}/withdrawal-allowlist {address}: adds it
// (the first address turns the allowlist on: only listed addresses).
func (s *Server) allowWithdrawalAddress(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(allowlistSchema)]
	var aerr *APIError
	if st.scratch, aerr = decodeObject(st.body, allowlistSchema, v, st.scratch); aerr != nil {
		return aerr
	}
	svc, u, aerr := s.limitsUser(st)
	if aerr != nil {
		return aerr
	}
	if !v[0].set {
		return missing("address")
	}
	c, cancel := chainCtx()
	defer cancel()
	addr, err := svc.AllowAddress(c, u, string(v[0].b))
	if err != nil {
		return s.chainError("allow address", err)
	}
	s.log.Info("gateway: admin withdrawal allowlist add", "admin", st.claims.UserID, "user_id", uint64(u), "address", addr)
	return s.limitsAnswer(ctx, st)
}

// DELETE /admin/v1/users/{user_id}/withdrawal-allowlist?address=: removes
// it (removing the last one turns the allowlist off: any address).
func (s *Server) disallowWithdrawalAddress(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	return s.limitsChange(ctx, st, "address", func(c context.Context, svc WithdrawalLimits, u core.UserID, arg string) error {
		return svc.DisallowAddress(c, u, arg)
	})
}

// limitsChange runs a DELETE whose argument is the query parameter name.
func (s *Server) limitsChange(ctx *fasthttp.RequestCtx, st *reqState, name string,
	fn func(context.Context, WithdrawalLimits, core.UserID, string) error) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	svc, u, aerr := s.limitsUser(st)
	if aerr != nil {
		return aerr
	}
	arg := string(ctx.QueryArgs().Peek(name))
	if arg == "" {
		return BadRequest(CodeMissingField, name+" is required")
	}
	c, cancel := chainCtx()
	defer cancel()
	if err := fn(c, svc, u, arg); err != nil {
		return s.chainError("withdrawal limits", err)
	}
	s.log.Info("gateway: admin withdrawal limits change", "admin", st.claims.UserID, "user_id", uint64(u), "method", "DELETE", name, arg)
	return s.limitsAnswer(ctx, st)
}

func (s *Server) limitsAnswer(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	svc, u, aerr := s.limitsUser(st)
	if aerr != nil {
		return aerr
	}
	c, cancel := chainCtx()
	defer cancel()
	views, list, err := svc.Limits(c, u)
	if err != nil {
		return s.chainError("withdrawal limits", err)
	}
	limits := make([]any, 0, len(views))
	for _, v := range views {
		src := "default"
		if v.Overridden {
			src = "user"
		}
		sc := uint8(v.Asset.Scale)
		limits = append(limits, map[string]any{"asset": v.Asset.Symbol, "daily_amount": FormatUnits(int64(v.Limit.Amount), sc),
			"daily_count": v.Limit.Count, "source": src, "used_amount": FormatUnits(int64(v.UsedAmount), sc), "used_count": v.UsedCount})
	}
	addrs := make([]any, 0, len(list))
	for _, a := range list {
		addrs = append(addrs, s.chain.Checksum(a))
	}
	return s.replyJSON(ctx, st, http.StatusOK, map[string]any{"user_id": uint64(u), "limits": limits, "allowlist": addrs})
}
