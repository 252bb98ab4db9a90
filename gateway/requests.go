package gateway

import (
	"unsafe"

	"github.com/ubscore/ubscore/core"
)

// Request schemas and their layer-1 validation: everything that can be
// decided from the request and the Registry alone is decided here, so a bad
// request never reaches the sequencer. The core re-checks all of it and its
// answer wins (e.g. a market halted after this check).

// POST /api/v1/order
var orderSchema = []jsonField{
	{"market", jsonString}, {"side", jsonString}, {"type", jsonString}, {"time_in_force", jsonString},
	{"price", jsonMoney}, {"quantity", jsonMoney}, {"quote_quantity", jsonMoney}, {"client_order_id", jsonString},
	{"outcome", jsonString}, // binary markets (binary.go): YES | NO
}

const (
	ofMarket = iota
	ofSide
	ofType
	ofTIF
	ofPrice
	ofQty
	ofQuoteQty
	ofClientID
	ofOutcome
)

// PATCH /api/v1/order/{id}
var modifySchema = []jsonField{{"price", jsonMoney}, {"quantity", jsonMoney}}

const (
	mfPrice = iota
	mfQty
)

// POST /admin/v1/adjust
var adjustSchema = []jsonField{{"user_id", jsonNumber}, {"asset", jsonString}, {"amount", jsonMoney}, {"ref", jsonString},
	{"balance", jsonString}}

const (
	afUser = iota
	afAsset
	afAmount
	afRef
	afBalance // optional: "available" (the default) or "frozen" (the repair of frozen funds no order holds)
)

// POST /admin/v1/accounts/{user_id}/status
var statusSchema = []jsonField{{"status", jsonString}}

// Bodies of endpoints that take none: empty, or {}.
var emptySchema = []jsonField{}

func missing(field string) *APIError {
	return BadRequest(CodeMissingField, "field "+field+" is required")
}

// parseOrder validates a POST /order body into a KindPlaceOrder command
// (User is set by the caller). The checks, in order:
//
//	JSON shape (decodeObject)
//	market: required, registered                         → MISSING_FIELD, INVALID_MARKET
//	side: BUY|SELL; type: LIMIT|MARKET                    → INVALID_SIDE, INVALID_ORDER_TYPE
//	time_in_force: LIMIT GTC (default)|IOC|FOK|POST_ONLY,
//	               MARKET IOC (default)                   → INVALID_TIME_IN_FORCE
//	price: LIMIT only, required; quote scale; on the tick → MISSING_FIELD, INVALID_PRICE, amount codes
//	quantity: base scale; on the lot; within min..max      → INVALID_QUANTITY, QUANTITY_TOO_*, amount codes
//	quote_quantity: MARKET BUY only, instead of quantity   → INVALID_QUANTITY, amount codes
//	client_order_id: 1..32 printable ASCII                 → INVALID_KEY
//
// "amount codes" are ParseUnits': INVALID_AMOUNT (not a decimal, <= 0),
// PRECISION_OVERFLOW, OVERFLOW.
func parseOrder(body []byte, reg *Registry, st *reqState) (core.Command, *Market, *APIError) {
	var c core.Command
	v := st.vals[:len(orderSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(body, orderSchema, v, st.scratch); err != nil {
		return c, nil, err
	}
	if v[ofOutcome].set {
		return c, nil, nil // a binary market's order: postBinaryOrder reads st.vals
	}
	if !v[ofMarket].set {
		return c, nil, missing("market")
	}
	m, ok := reg.MarketBytes(v[ofMarket].b)
	if !ok {
		return c, nil, coreError(core.CodeInvalidMarket)
	}
	c.Kind, c.Market = core.KindPlaceOrder, m.ID
	if err := orderSide(&c, v[ofSide]); err != nil {
		return c, nil, err
	}
	if !v[ofType].set {
		return c, nil, missing("type")
	}
	switch string(v[ofType].b) {
	case "LIMIT":
		c.Type = core.Limit
	case "MARKET":
		c.Type = core.Market
	default:
		return c, nil, coreError(core.CodeInvalidOrderType)
	}
	if err := orderTIF(&c, v[ofTIF]); err != nil {
		return c, nil, err
	}
	if err := orderAmounts(&c, m, v); err != nil {
		return c, nil, err
	}
	if err := orderKey(&c, v[ofClientID]); err != nil {
		return c, nil, err
	}
	return c, m, nil
}

// orderSide sets c.Side from the order's "side" (required: BUY | SELL).
func orderSide(c *core.Command, side jsonValue) *APIError {
	switch string(side.b) {
	case "BUY":
		c.Side = core.Buy
	case "SELL":
		c.Side = core.Sell
	default:
		if !side.set {
			return missing("side")
		}
		return coreError(core.CodeInvalidSide)
	}
	return nil
}

// orderKey sets c.Key from the order's optional "client_order_id".
func orderKey(c *core.Command, id jsonValue) *APIError {
	if !id.set {
		return nil
	}
	k, ok := parseKey(id.b)
	if !ok {
		return BadRequest(CodeInvalidKey, "client_order_id must be 1-32 printable ASCII characters")
	}
	c.Key = k
	return nil
}

func orderTIF(c *core.Command, tif jsonValue) *APIError {
	if !tif.set {
		if c.Type == core.Limit {
			c.TIF = core.GTC
		}
		return nil // MARKET: the core treats an absent TIF as IOC
	}
	switch string(tif.b) {
	case "GTC":
		c.TIF = core.GTC
	case "IOC":
		c.TIF = core.IOC
	case "FOK":
		c.TIF = core.FOK
	case "POST_ONLY":
		c.TIF = core.PostOnly
	default:
		return coreError(core.CodeInvalidTimeInForce)
	}
	if c.Type == core.Market && c.TIF != core.IOC {
		return BadRequest(CodeInvalidTimeInForce, "a MARKET order is always IOC")
	}
	return nil
}

// orderAmounts parses price, quantity and quote_quantity by order type.
func orderAmounts(c *core.Command, m *Market, v []jsonValue) *APIError {
	if c.Type == core.Limit {
		if !v[ofPrice].set {
			return missing("price")
		}
		if v[ofQuoteQty].set {
			return BadRequest(CodeInvalidQuantity, "quote_quantity is only for MARKET BUY orders")
		}
		p, err := parsePrice(v[ofPrice].b, m)
		if err != nil {
			return err
		}
		c.Price = p
	} else if v[ofPrice].set {
		return BadRequest(CodeInvalidPrice, "a MARKET order has no price")
	}
	switch {
	case v[ofQty].set && v[ofQuoteQty].set:
		return BadRequest(CodeInvalidQuantity, "give quantity or quote_quantity, not both")
	case v[ofQuoteQty].set:
		if c.Side != core.Buy {
			return BadRequest(CodeInvalidQuantity, "quote_quantity is only for MARKET BUY orders")
		}
		q, err := ParseUnits(bstr(v[ofQuoteQty].b), m.Quote.Scale)
		if err != nil {
			return err.(*APIError)
		}
		c.QuoteQty = core.Units(q)
	case v[ofQty].set:
		q, err := parseQty(v[ofQty].b, m)
		if err != nil {
			return err
		}
		c.Qty = q
	default:
		return missing("quantity")
	}
	return nil
}

// parsePrice reads a price at the quote asset's scale and checks the tick.
func parsePrice(b []byte, m *Market) (core.Price, *APIError) {
	p, err := ParseUnits(bstr(b), m.Quote.Scale)
	if err != nil {
		return 0, err.(*APIError)
	}
	if p%int64(m.Cfg.Tick) != 0 {
		return 0, BadRequest(CodeInvalidPrice, "price must be a multiple of the tick "+FormatUnits(int64(m.Cfg.Tick), m.Quote.Scale))
	}
	return core.Price(p), nil
}

// parseQty reads a base quantity and checks lot, minimum and maximum.
func parseQty(b []byte, m *Market) (core.Units, *APIError) {
	q, err := ParseUnits(bstr(b), m.Base.Scale)
	if err != nil {
		return 0, err.(*APIError)
	}
	cfg := &m.Cfg
	switch {
	case q%int64(cfg.Lot) != 0:
		return 0, BadRequest(CodeInvalidQuantity, "quantity must be a multiple of the lot "+FormatUnits(int64(cfg.Lot), m.Base.Scale))
	case q < int64(cfg.MinQty):
		return 0, BadRequest(CodeQuantityTooSmall, "quantity is below the minimum "+FormatUnits(int64(cfg.MinQty), m.Base.Scale))
	case q > int64(cfg.MaxQty):
		return 0, BadRequest(CodeQuantityTooLarge, "quantity is above the maximum "+FormatUnits(int64(cfg.MaxQty), m.Base.Scale))
	}
	return core.Units(q), nil
}

// parseKey accepts 1..len(core.Key) printable ASCII bytes (0x20..0x7E): a
// client order id or a ref is echoed back and logged, so nothing else.
func parseKey(b []byte) (core.Key, bool) {
	var k core.Key
	if len(b) == 0 || len(b) > len(k) {
		return k, false
	}
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			return k, false
		}
		k[i] = c
	}
	return k, true
}

// parseModify validates a PATCH body for an order of market m.
func parseModify(v []jsonValue, m *Market) (core.Price, core.Units, *APIError) {
	var p core.Price
	var q core.Units
	var err *APIError
	if !v[mfPrice].set && !v[mfQty].set {
		return 0, 0, BadRequest(CodeNothingToModify, "give price and/or quantity")
	}
	if v[mfPrice].set {
		if p, err = parsePrice(v[mfPrice].b, m); err != nil {
			return 0, 0, err
		}
	}
	if v[mfQty].set {
		if q, err = parseQty(v[mfQty].b, m); err != nil {
			return 0, 0, err
		}
	}
	return p, q, nil
}

// parseAdjust validates a POST /admin/v1/adjust body into a KindAdjust.
// amount is signed (a debit is negative) and never zero.
func parseAdjust(body []byte, reg *Registry, st *reqState) (core.Command, Asset, *APIError) {
	c := core.Command{Kind: core.KindAdjust}
	v := st.vals[:len(adjustSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(body, adjustSchema, v, st.scratch); err != nil {
		return c, Asset{}, err
	}
	for i, f := range adjustSchema[:afBalance] {
		if !v[i].set {
			return c, Asset{}, missing(f.name)
		}
	}
	if v[afBalance].set {
		switch string(v[afBalance].b) {
		case "available":
		case "frozen":
			c.Flags = core.AdjustFrozen
		default:
			return c, Asset{}, BadRequest(CodeInvalidParameter, "balance must be available or frozen")
		}
	}
	u, ok := parseUint(v[afUser].b)
	if !ok {
		return c, Asset{}, BadRequest(CodeInvalidUser, "user_id must be a non-negative integer")
	}
	a, ok := reg.AssetBytes(v[afAsset].b)
	if !ok {
		return c, Asset{}, coreError(core.CodeInvalidAsset)
	}
	amt, aerr := parseSigned(v[afAmount].b, a.Scale)
	if aerr != nil {
		return c, Asset{}, aerr
	}
	k, ok := parseKey(v[afRef].b)
	if !ok {
		return c, Asset{}, BadRequest(CodeInvalidKey, "ref must be 1-32 printable ASCII characters")
	}
	c.User, c.Asset, c.Amount, c.Key = core.UserID(u), a.ID, core.Units(amt), k
	return c, a, nil
}

// parseSigned is ParseUnits for a signed, non-zero amount.
func parseSigned(b []byte, scale uint8) (int64, *APIError) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	v, err := ParseUnits(bstr(b), scale)
	if err != nil {
		return 0, err.(*APIError)
	}
	if neg {
		v = -v
	}
	return v, nil
}

// parseUint accepts the canonical decimal form of a uint64 (a JSON integer
// without sign, fraction or exponent; "0" allowed).
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	return parseUserID(bstr(b))
}

// parseAccountStatus reads ACTIVE|FROZEN|DISABLED.
func parseAccountStatus(b []byte) (core.AccountStatus, bool) {
	switch string(b) {
	case "ACTIVE":
		return core.Active, true
	case "FROZEN":
		return core.Frozen, true
	case "DISABLED":
		return core.Disabled, true
	}
	return 0, false
}

// bstr views b as a string without copying. Only for callees that do not
// keep the string (ParseUnits, parseUserID: their errors never quote the
// input), so the request buffer may be reused afterwards.
func bstr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
