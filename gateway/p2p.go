package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// The transfer service's API (spec 003) at the spec's own paths, with its
// field names (camelCase), its amounts (JSON numbers with the asset's
// decimals), its status codes and error codes, and its error body
// {timestamp, status, error, message} plus our code. Beyond the spec (which
// has no security): every path needs the bearer token; creating users is
// admin-only; a transfer's fromUserId must be the caller (or an admin); only
// the sender (or an admin) cancels; balances and history only for oneself
// (or an admin), else 403 FORBIDDEN. Handles (the spec's userId) are
// resolved to numeric user ids (the token's sub) in the core's read view.

// P2PConfig enables the transfer service (ServerConfig.P2P).
type P2PConfig struct {
	Asset core.AssetID  // the service's asset; its scale is the API's decimals
	Scale uint8         // the asset's scale (USD: 2)
	Hold  time.Duration // the cancel window: executeAt = createdAt + Hold
}

// The spec's error codes produced at the edge (the core's share its strings).
const (
	CodeInvalidUserID        = "INVALID_USER_ID"
	CodeInvalidBalance       = "INVALID_BALANCE"
	CodeInvalidDecimalPlaces = "INVALID_DECIMAL_PLACES"
	CodeUserNotFound         = "USER_NOT_FOUND"
	CodeInvalidPagination    = "INVALID_PAGINATION"
	CodeTransferNotFound     = "TRANSFER_NOT_FOUND"
)

// Spec §2.2.2: page >= 1, 1 <= size <= MaxP2PPageSize (the bound is ours).
const (
	MaxP2PPageSize     = 100
	defaultP2PPageSize = 10
)

func init() {
	for c, v := range map[core.Code]struct {
		status int
		msg    string
	}{
		core.CodeInvalidHandle:           {400, "Invalid userId format"},
		core.CodeInvalidBalance:          {400, "Initial balance must be non-negative"},
		core.CodeUserAlreadyExists:       {400, "User already exists"},
		core.CodeSelfTransfer:            {400, "Cannot transfer to self"},
		core.CodeSenderNotFound:          {400, "Sender user not found"},
		core.CodeRecipientNotFound:       {400, "Recipient user not found"},
		core.CodeTransferNotFound:        {404, "Transfer not found"},
		core.CodeCannotCancelTransfer:    {400, "Cannot cancel transfer"},
		core.CodeCancelWindowExpired:     {400, "Cancel time window expired"},
		core.CodeNotTransferSender:       {403, "only the sender or an admin may cancel a transfer"},
		core.CodeTooManyPendingTransfers: {409, "too many pending transfers for this sender"},
		core.CodePendingTransfersFull:    {409, "too many pending transfers; retry later"},
		core.CodeTooManyTransfers:        {409, "the transfer service is full"},
	} {
		coreStatus[c] = v
		coreErrors[c] = &APIError{Status: v.status, Code: c.String(), Message: v.msg}
	}
}

// p2pCoreError is a core rejection on a spec 003 path: the spec's statuses
// (INSUFFICIENT_BALANCE is 400 there).
func p2pCoreError(c core.Code) *APIError {
	e := coreError(c)
	if c == core.CodeInsufficientBalance {
		e = &APIError{Status: http.StatusBadRequest, Code: e.Code, Message: "Insufficient balance"}
	}
	return e
}

// isP2PPath reports whether path is one of spec 003's (its errors use the spec's body).
func isP2PPath(path []byte) bool {
	return hasSegPrefix(path, "/balance-service") || hasSegPrefix(path, "/transfers")
}

// appendP2PError appends spec 003 §4.2's error body plus our code.
func appendP2PError(dst []byte, e *APIError, now time.Time) []byte {
	dst = append(dst, `{"timestamp":`...)
	dst = appendTime(dst, now.UnixNano())
	dst = append(dst, `,"status":`...)
	dst = strconv.AppendInt(dst, int64(e.Status), 10)
	dst = append(dst, `,"error":`...)
	dst = appendStr(dst, http.StatusText(e.Status))
	dst = append(dst, `,"message":`...)
	dst = appendStr(dst, e.Message)
	dst = append(dst, `,"code":`...)
	dst = appendStr(dst, e.Code)
	return append(dst, '}')
}

// appendTime appends unix ns as a quoted ISO 8601 UTC time.
func appendTime(dst []byte, ns int64) []byte {
	dst = append(dst, '"')
	dst = time.Unix(0, ns).UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

func appendTimeOrNull(dst []byte, ns int64) []byte {
	if ns == 0 {
		return append(dst, "null"...)
	}
	return appendTime(dst, ns)
}

// p2pAmount is how a spec 003 amount failed to parse.
type p2pAmount uint8

const (
	amtOK       p2pAmount = iota
	amtFormat             // not a plain decimal number (exponent, garbage), or too large
	amtNegative           // below zero
	amtTooSmall           // below one unit of the scale (for a transfer: < 0.01)
	amtDecimals           // a non-zero digit beyond the scale
)

// parseP2PAmount reads a JSON number (or decimal string) at scale. The
// checks follow spec 003 §3.3.1: the value is judged (negative, then
// below one unit) before its decimals, so 0.001 is INVALID_AMOUNT and
// 100.123 is INVALID_DECIMAL_PLACES.
func parseP2PAmount(b []byte, scale uint8) (int64, p2pAmount) {
	if len(b) > MaxDecimalLen {
		return 0, amtFormat
	}
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	ip, frac, ok := splitDecimal(bstr(b))
	if !ok {
		return 0, amtFormat
	}
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	zero := ip == "0" && frac == ""
	if neg && !zero {
		return 0, amtNegative
	}
	head := frac
	if len(head) > int(scale) {
		head = head[:scale]
	}
	v, ok := accumulate(0, ip)
	if ok {
		v, ok = accumulate(v, head)
	}
	for i := len(head); ok && i < int(scale); i++ {
		v, ok = accumulate(v, "0")
	}
	if !ok {
		return 0, amtFormat
	}
	if v == 0 {
		return 0, amtTooSmall
	}
	if len(frac) > int(scale) {
		return 0, amtDecimals
	}
	return v, amtOK
}

func decimalsError(scale uint8) *APIError {
	return BadRequest(CodeInvalidDecimalPlaces, "Amount must have at most "+strconv.Itoa(int(scale))+" decimal places")
}

// POST /balance-service/users
var p2pUserSchema = []jsonField{{"userId", jsonString}, {"initialBalance", jsonP2PAmount}, {"id", jsonNumber}}

// postP2PUser: spec §3.1's checks in order — userId present, its format,
// initialBalance present, >= 0, at most the scale's decimals, then the core
// (USER_ALREADY_EXISTS). Admin only.
func (s *Server) postP2PUser(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := RequireAdmin(st.claims); err != nil {
		e, _ := AsAPIError(err)
		return e
	}
	v := st.vals[:len(p2pUserSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(st.body, p2pUserSchema, v, st.scratch); err != nil {
		return err
	}
	if !v[0].set {
		return BadRequest(CodeMissingField, "Missing required field: userId")
	}
	if !core.ValidP2PHandle(bstr(v[0].b)) {
		return BadRequest(CodeInvalidUserID, "Invalid userId format")
	}
	if !v[1].set {
		return BadRequest(CodeMissingField, "Missing required field: initialBalance")
	}
	cfg := s.p2p
	amt, why := parseP2PAmount(v[1].b, cfg.Scale)
	switch why {
	case amtFormat, amtNegative:
		return BadRequest(CodeInvalidBalance, "Initial balance must be non-negative")
	case amtDecimals:
		return decimalsError(cfg.Scale)
	}
	c := &st.cmd
	*c = core.Command{Kind: core.KindP2PCreateUser, Text: string(v[0].b), Asset: cfg.Asset, Amount: core.Units(amt)}
	if v[2].set {
		id, ok := parseUserID(bstr(v[2].b))
		if !ok || core.UserID(id) >= core.P2PUserBase {
			return BadRequest(CodeInvalidUser, "id must be an integer in [1, 2^40)")
		}
		c.User = core.UserID(id)
	}
	res, evs, aerr := s.submit(st, c)
	if aerr != nil {
		return aerr
	}
	if res.Code != core.OK {
		return p2pCoreError(res.Code)
	}
	var id core.UserID
	for i := range evs {
		if evs[i].Kind == core.EvP2PUser {
			id = evs[i].User
		}
	}
	s.log.Info("User created", "userId", c.Text, "id", id, "balance", FormatUnits(amt, cfg.Scale))
	o := append(st.out[:0], `{"userId":`...)
	o = appendStr(o, c.Text)
	o = append(o, `,"id":`...)
	o = appendUint(o, uint64(id))
	o = append(o, `,"balance":`...)
	o = AppendUnits(o, amt, cfg.Scale)
	o = append(o, `,"createdAt":`...)
	o = appendTime(o, res.Time)
	st.out = append(o, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// ownHandle checks that the caller may act as handle h: an admin always,
// anyone else only as their own handle (checked before existence, so a
// non-admin learns nothing about other handles). It returns h's user (ok
// false: not found, only possible for an admin).
func ownHandle(p *core.Processor, cl Claims, h []byte) (core.P2PUser, bool, *APIError) {
	u, ok := p.P2PUserByHandle(bstr(h))
	if !cl.Admin && (!ok || uint64(u.ID) != cl.UserID) {
		return u, false, Forbidden("token does not belong to this user")
	}
	return u, ok, nil
}

// getP2PBalance: GET /balance-service/users/{userId}/balance.
func (s *Server) getP2PBalance(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	h := st.params[0]
	if len(h) < core.MinP2PHandleLen || len(h) > core.MaxP2PHandleLen {
		return BadRequest(CodeInvalidUserID, "Invalid userId format")
	}
	var b core.Balance
	var aerr *APIError
	err := s.backend.Read(func(p *core.Processor, _ *History) error {
		u, ok, e := ownHandle(p, st.claims, h)
		if e != nil {
			aerr = e
			return nil
		}
		if !ok {
			aerr = &APIError{Status: http.StatusNotFound, Code: CodeUserNotFound, Message: "User not found"}
			return nil
		}
		b = p.BalanceOf(u.ID, s.p2p.Asset)
		return nil
	})
	if err != nil {
		return s.backendError(err)
	}
	if aerr != nil {
		return aerr
	}
	sc := s.p2p.Scale
	o := append(st.out[:0], `{"userId":`...)
	o = appendStrBytes(o, h)
	o = append(o, `,"balance":`...)
	o = AppendUnits(o, int64(b.Avail+b.Frozen), sc)
	o = append(o, `,"available":`...)
	o = AppendUnits(o, int64(b.Avail), sc)
	o = append(o, `,"held":`...)
	o = AppendUnits(o, int64(b.Frozen), sc)
	st.out = append(o, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}
