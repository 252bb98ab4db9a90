package gateway

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// POST /admin/v1/faults/core (only with --enable-fault-injection): submits a
// sequenced fault command that corrupts one piece of core state past the
// per-command checks (core/fault.go), for the fault-injection suite:
//
//	{"fault": "level_drift", "market": "BTC-USDT", "side": "BUY"|"SELL", "amount": "0.01"}   (base asset)
//	{"fault": "stray_frozen"|"negative_balance", "user_id": 7, "asset": "USDT", "amount": "5"}
var coreFaultSchema = []jsonField{{"fault", jsonString}, {"market", jsonString}, {"side", jsonString},
	{"user_id", jsonNumber}, {"asset", jsonString}, {"amount", jsonMoney}}

var coreFaults = map[string]core.Fault{"level_drift": core.FaultLevelDrift, "stray_frozen": core.FaultStrayFrozen,
	"negative_balance": core.FaultNegativeBalance}

func (s *Server) injectCoreFault(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(coreFaultSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(st.body, coreFaultSchema, v, st.scratch); err != nil {
		return err
	}
	f, ok := coreFaults[string(v[0].b)]
	if !ok {
		return BadRequest(CodeInvalidParameter, "fault must be level_drift, stray_frozen or negative_balance")
	}
	if !v[5].set {
		return missing("amount")
	}
	c := core.Command{Kind: core.KindFault, Flags: uint8(f)}
	var scale uint8
	if f == core.FaultLevelDrift {
		m, ok := s.reg.MarketBytes(v[1].b)
		if !ok {
			return coreError(core.CodeInvalidMarket)
		}
		side := map[string]core.Side{"BUY": core.Buy, "SELL": core.Sell}[string(v[2].b)]
		if side == 0 {
			return BadRequest(CodeInvalidSide, "side must be BUY or SELL")
		}
		c.Market, c.Side = m.ID, side
		a, _ := s.reg.AssetByID(m.Cfg.Base)
		scale = a.Scale
	} else {
		u, ok := parseUint(v[3].b)
		if !v[3].set || !ok {
			return BadRequest(CodeInvalidUser, "user_id must be a non-negative integer")
		}
		a, ok := s.reg.AssetBytes(v[4].b)
		if !ok {
			return coreError(core.CodeInvalidAsset)
		}
		c.User, c.Asset, scale = core.UserID(u), a.ID, a.Scale
	}
	amt, perr := ParseUnits(bstr(v[5].b), scale)
	if perr != nil {
		return perr.(*APIError)
	}
	c.Amount = core.Units(amt)
	st.cmd = c
	res, _, err := s.submit(st, &st.cmd)
	if err != nil {
		return err
	}
	s.log.Warn("gateway: core fault injected", "admin", st.claims.UserID, "fault", string(v[0].b), "seq", uint64(res.Seq),
		"code", res.Code.String())
	if res.Code != core.OK {
		return coreError(res.Code)
	}
	return s.replyJSON(ctx, st, http.StatusOK, map[string]any{"fault": string(v[0].b), "seq": res.Seq})
}
