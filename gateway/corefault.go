package gateway

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// POST /admin/v1/faults/core (only with --enable-fault-injection): submits a
// sequenced fault command that corrupts one piece of core state past the
// per-command checks (core/fault.go), for the fault-injection suite and for
// rehearsing each halt and its resolution in staging:
//
//	{"fault": "level_drift", "market": "BTC-USDT"|"20", "side": "BUY"|"SELL", "amount": "0.01"}
//	    (spot: base asset; binary: whole shares, side of the YES book)     ORDERBOOK_DESYNC
//	{"fault": "stray_frozen"|"negative_balance", "user_id": 7, "asset": "USDT", "amount": "5"}
//	{"fault": "binary_shares",   "market": "20", "user_id": 7, "amount": "3"}    INVARIANT_SHARES (NO shares)
//	{"fault": "binary_reserve",  "market": "20", "amount": "0.5"}                INVARIANT_RESERVE (quote asset)
//	{"fault": "binary_cost_sum", "market": "20", "user_id": 7, "amount": "0.5"}  INVARIANT_COST_SUM (quote asset)
//	{"fault": "binary_oversold", "market": "20", "user_id": 7, "amount": "1"}    INVARIANT_OVERSOLD (YES shares)
//
// A member the fault does not take is 400 UNKNOWN_FIELD, so a mistyped
// rehearsal fails loudly instead of corrupting something else.
var coreFaultSchema = []jsonField{{"fault", jsonString}, {"market", jsonString}, {"side", jsonString},
	{"user_id", jsonNumber}, {"asset", jsonString}, {"amount", jsonMoney}}

const (
	cfFault = iota
	cfMarket
	cfSide
	cfUser
	cfAsset
	cfAmount
)

// coreFaultSpec is one fault of the endpoint: its core value and the
// members it takes (bits of 1<<cf*; fault and amount always).
type coreFaultSpec struct {
	f     core.Fault
	takes uint8
}

var coreFaults = map[string]coreFaultSpec{
	"level_drift":      {core.FaultLevelDrift, 1<<cfMarket | 1<<cfSide},
	"stray_frozen":     {core.FaultStrayFrozen, 1<<cfUser | 1<<cfAsset},
	"negative_balance": {core.FaultNegativeBalance, 1<<cfUser | 1<<cfAsset},
	"binary_shares":    {core.FaultBinaryShares, 1<<cfMarket | 1<<cfUser},
	"binary_reserve":   {core.FaultBinaryReserve, 1 << cfMarket},
	"binary_cost_sum":  {core.FaultBinaryCostSum, 1<<cfMarket | 1<<cfUser},
	"binary_oversold":  {core.FaultBinaryOversold, 1<<cfMarket | 1<<cfUser},
}

func (s *Server) injectCoreFault(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(coreFaultSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(st.body, coreFaultSchema, v, st.scratch); err != nil {
		return err
	}
	spec, ok := coreFaults[string(v[cfFault].b)]
	if !ok {
		return BadRequest(CodeInvalidParameter, "fault must be level_drift, stray_frozen, negative_balance, "+
			"binary_shares, binary_reserve, binary_cost_sum or binary_oversold")
	}
	for i := cfMarket; i <= cfAsset; i++ {
		if v[i].set && spec.takes&(1<<i) == 0 {
			return BadRequest(CodeUnknownField, "fault "+string(v[cfFault].b)+" takes no "+coreFaultSchema[i].name)
		}
	}
	if !v[cfAmount].set {
		return missing("amount")
	}
	c := core.Command{Kind: core.KindFault, Flags: uint8(spec.f)}
	var scale uint8 // shares are whole
	if spec.takes&(1<<cfMarket) != 0 {
		if !v[cfMarket].set {
			return missing("market")
		}
		id, _, err := s.opMarket(v[cfMarket].b)
		if err != nil {
			return err
		}
		c.Market = id
		spot, isSpot := s.reg.MarketByID(id)
		switch {
		case spec.f == core.FaultLevelDrift && isSpot:
			a, _ := s.reg.AssetByID(spot.Cfg.Base)
			scale = a.Scale
		case spec.f == core.FaultBinaryReserve || spec.f == core.FaultBinaryCostSum:
			_, q, _, err := s.binaryInfo(id) // NOT_BINARY for a spot market
			if err != nil {
				return err
			}
			scale = q.Scale
		}
	}
	if spec.takes&(1<<cfSide) != 0 {
		side := map[string]core.Side{"BUY": core.Buy, "SELL": core.Sell}[string(v[cfSide].b)]
		if side == 0 {
			return BadRequest(CodeInvalidSide, "side must be BUY or SELL")
		}
		c.Side = side
	}
	if spec.takes&(1<<cfUser) != 0 {
		u, ok := parseUint(v[cfUser].b)
		if !v[cfUser].set || !ok {
			return BadRequest(CodeInvalidUser, "user_id must be a non-negative integer")
		}
		c.User = core.UserID(u)
	}
	if spec.takes&(1<<cfAsset) != 0 {
		a, ok := s.reg.AssetBytes(v[cfAsset].b)
		if !ok {
			return coreError(core.CodeInvalidAsset)
		}
		c.Asset, scale = a.ID, a.Scale
	}
	amt, perr := ParseUnits(bstr(v[cfAmount].b), scale)
	if perr != nil {
		return perr.(*APIError)
	}
	c.Amount = core.Units(amt)
	st.cmd = c
	res, _, err := s.submit(st, &st.cmd)
	if err != nil {
		return err
	}
	s.log.Warn("gateway: core fault injected", "admin", st.claims.UserID, "fault", string(v[cfFault].b), "seq", uint64(res.Seq),
		"code", res.Code.String())
	if res.Code != core.OK {
		return coreError(res.Code)
	}
	return s.replyJSON(ctx, st, http.StatusOK, map[string]any{"fault": string(v[cfFault].b), "seq": res.Seq})
}
