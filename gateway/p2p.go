package gateway

import (
	"math"
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
// (or an admin), else 403 FORBIDDEN. What a caller cannot see answers like
// what does not exist: another's handle and an unknown one are both 403, a
// transfer it neither sends nor receives is 404 like an unknown id. Handles
// (the spec's userId) are resolved to numeric user ids (the token's sub) in
// the core's read view.

// P2PConfig enables the transfer service (ServerConfig.P2P).
type P2PConfig struct {
	Asset core.AssetID  // the service's asset; its scale is the API's decimals
	Scale uint8         // the asset's scale (USD: 2)
	Hold  time.Duration // the cancel window: executeAt = createdAt + Hold
	// Archive, if set, answers the history pages that reach transfers the
	// core forgot (RunP2PRetention); without it nothing is ever forgotten,
	// so the core answers every page.
	Archive P2PArchive
}

// P2PArchive is the sink's copy of the transfers (p2p_transfers), which
// holds every transfer the core forgot.
type P2PArchive interface {
	// PersistedSeq is the last seq whose effects the archive holds.
	PersistedSeq() core.Seq
	// P2PTransfers calls each with the transfers of the user with handle,
	// newest first, skipping the newest offset, at most limit.
	P2PTransfers(handle string, offset, limit int, each func(t core.P2PTransfer, from, to string)) error
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

// appendTime appends unix ns as a quoted ISO 8601 UTC time, in whole
// microseconds: what p2p_transfers (timestamptz) keeps, so a transfer reads
// the same from the core and, once the retention made the core forget it,
// from Postgres (before, the core's answers had nanoseconds and the
// archive's the same times truncated).
func appendTime(dst []byte, ns int64) []byte {
	dst = append(dst, '"')
	dst = time.Unix(0, ns-ns%1000).UTC().AppendFormat(dst, time.RFC3339Nano)
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
	amtFormat             // not a number (true, [1], "abc", 01, 1.), or too large
	amtNegative           // below zero
	amtZero               // zero (0, -0, 0.00, 0e5)
	amtTooSmall           // above zero, below one unit of the scale (0.001 at scale 2)
	amtDecimals           // a non-zero digit beyond the scale
)

// maxP2PExponent caps the exponent read: with at most MaxDecimalLen digits
// and MaxScale, any bigger one gives the same answer (too large, or below
// one unit).
const maxP2PExponent = 1000

// parseP2PAmount reads a spec 003 amount at scale: the text of a JSON number
// in any of its forms, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? (so
// 1e1 is 10 and 15E-1 is 1.5), or a string holding one. The value is judged
// first (negative, zero, too large, below one unit), then its decimals, the
// order of spec 003 §3.3.1, so 0.001 is amtTooSmall and 100.123
// amtDecimals; the caller maps them to its codes (a user's initial balance
// may be zero, a transfer may not). It does not allocate.
func parseP2PAmount(b []byte, scale uint8) (int64, p2pAmount) {
	if len(b) > MaxDecimalLen {
		return 0, amtFormat
	}
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	mant, exp, ok := splitExponent(bstr(b))
	if !ok {
		return 0, amtFormat
	}
	ip, frac, ok := splitDecimal(mant)
	if !ok {
		return 0, amtFormat
	}
	// The value is M × 10^shift units, M the digits of ip then frac: the
	// first keep digits make the units, the rest are beyond the scale.
	n := len(ip) + len(frac)
	shift := exp - len(frac) + int(scale)
	keep := n
	if shift < 0 {
		keep = max(n+shift, 0)
	}
	digit := func(i int) byte {
		if i < len(ip) {
			return ip[i]
		}
		return frac[i-len(ip)]
	}
	nonzero, dropped := false, false
	for i := 0; i < n; i++ {
		if digit(i) != '0' {
			nonzero = true
			dropped = dropped || i >= keep
		}
	}
	switch {
	case !nonzero:
		return 0, amtZero
	case neg:
		return 0, amtNegative
	}
	var v int64
	ok = true
	for i := 0; ok && i < keep; i++ {
		v, ok = shiftIn(v, digit(i))
	}
	for ; ok && v > 0 && shift > 0; shift-- {
		v, ok = shiftIn(v, '0')
	}
	switch {
	case !ok:
		return 0, amtFormat
	case v == 0:
		return 0, amtTooSmall
	case dropped:
		return 0, amtDecimals
	}
	return v, amtOK
}

// shiftIn is v*10 + the digit c, false past math.MaxInt64.
func shiftIn(v int64, c byte) (int64, bool) {
	d := int64(c - '0')
	if v > (math.MaxInt64-d)/10 {
		return 0, false
	}
	return v*10 + d, true
}

// splitExponent splits a JSON number's unsigned text at its exponent
// ([eE][+-]?[0-9]+; absent: 0), capped at ±maxP2PExponent.
func splitExponent(s string) (mant string, exp int, ok bool) {
	i := 0
	for i < len(s) && s[i] != 'e' && s[i] != 'E' {
		i++
	}
	if i == len(s) {
		return s, 0, true
	}
	mant, e := s[:i], s[i+1:]
	sign := 1
	if len(e) > 0 && (e[0] == '+' || e[0] == '-') {
		if e[0] == '-' {
			sign = -1
		}
		e = e[1:]
	}
	if len(e) == 0 {
		return "", 0, false
	}
	for j := 0; j < len(e); j++ {
		if e[j] < '0' || e[j] > '9' {
			return "", 0, false
		}
		exp = min(exp*10+int(e[j]-'0'), maxP2PExponent)
	}
	return mant, sign * exp, true
}

func decimalsError(scale uint8) *APIError {
	return BadRequest(CodeInvalidDecimalPlaces, "Amount must have at most "+strconv.Itoa(int(scale))+" decimal places")
}

// POST /balance-service/users
var p2pUserSchema = []jsonField{{"userId", jsonString | jsonNullable}, {"initialBalance", jsonP2PAmount | jsonNullable},
	{"id", jsonNumber | jsonNullable}}

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
	case amtTooSmall, amtDecimals: // 0.001 has too many decimals, like 1000.123 (§3.1 step 2.5)
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
	// The answer's balance is the user's balance now (§2.1.1), which is more
	// than initialBalance when the id named an account that held money.
	var id core.UserID
	var bal core.Units
	for i := range evs {
		if evs[i].Kind == core.EvP2PUser {
			id, bal = evs[i].User, evs[i].Fee
		}
	}
	s.log.Info("User created", "userId", c.Text, "id", id, "balance", FormatUnits(int64(bal), cfg.Scale))
	o := append(st.out[:0], `{"userId":`...)
	o = appendStr(o, c.Text)
	o = append(o, `,"id":`...)
	o = appendUint(o, uint64(id))
	o = append(o, `,"balance":`...)
	o = AppendUnits(o, int64(bal), cfg.Scale)
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
