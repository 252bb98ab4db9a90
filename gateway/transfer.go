package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/ulid"
)

// Internal transfers FUNDING <-> SPOT (spec 000 §8) and the FUNDING ledger's
// admin endpoints. These are cold paths that wait on Postgres: they allocate
// freely and run on fasthttp's per-connection goroutine.

// TransferService is the internal-transfer side of the server.
type TransferService interface {
	// AssetConfig is the transfer view of an asset symbol (layer-1 checks).
	AssetConfig(symbol string) (model.AssetConfig, bool)
	// Create runs a transfer (transfer.Coordinator.Create): a refusal is a
	// *transfer.Error with the spec's code.
	Create(ctx context.Context, caller model.Caller, req model.Request) (transfer.Result, error)
	// Get returns a transfer (transfer.ErrNotFound if none).
	Get(ctx context.Context, reqID string) (transfer.Transfer, error)
	// List returns a page (1-based) of the user's transfers, newest first, and their total.
	List(ctx context.Context, user core.UserID, page, size int) ([]transfer.Transfer, int64, error)
	// FundingBalances returns the user's FUNDING accounts by asset.
	FundingBalances(ctx context.Context, user core.UserID) (map[core.AssetID]model.AccountState, error)
	// Deposit credits an external deposit, once per txRef (credited=false on
	// a repeat; transfer.ErrDepositConflict if txRef was used otherwise).
	Deposit(ctx context.Context, txRef string, user core.UserID, asset core.AssetID, amount core.Units) (credited bool, err error)
	// SetFundingStatus sets the status of one (asset != 0) or all of the
	// user's FUNDING accounts.
	SetFundingStatus(ctx context.Context, user core.UserID, asset core.AssetID, st model.AccountStatus) error
	// Invariants runs the conservation check now and returns its report as a JSON object.
	Invariants(ctx context.Context) ([]byte, error)
	// ResumeTransfers lifts the halt of new transfers after a conservation
	// violation (MON-003) and returns the state as a JSON object.
	ResumeTransfers(ctx context.Context) ([]byte, error)
}

// FaultInjector arms adapter faults (tests only: --enable-fault-injection).
type FaultInjector interface {
	// Inject makes the next count calls of adapter's op misbehave as mode;
	// an unknown adapter, op or mode is an error.
	Inject(adapter, op, mode string, count int) error
	// Clear disarms every fault.
	Clear()
}

// Limits of the transfer endpoints.
const (
	DefaultTransferPageSize = 20
	MaxTransferPageSize     = 100
	MaxTxRefLen             = 128 // funding_deposits.tx_ref
	// transferTimeout bounds one transfer request beyond the coordinator's
	// own bounded wait (which answers with the state reached).
	transferTimeout = 30 * time.Second
)

// Codes of the transfer endpoints beyond the spec's (transfer.Code*).
const (
	CodeDepositConflict = "DEPOSIT_CONFLICT" // 409: tx_ref already used with other parameters
	CodeTransfersHalted = "TRANSFERS_HALTED" // 503: the conservation check failed; an operator must resume
	CodeSystemError     = "SYSTEM_ERROR"     // 500: internal failure; retry (spec §8.2)
)

// POST /api/v1/internal_transfer {from, to, asset, amount, cid?, user_id?}:
// amount is a decimal string like every decimal of the API (a JSON number is
// INVALID_FIELD_TYPE, as for orders, adjust and deposit).
var transferSchema = []jsonField{{"from", jsonString}, {"to", jsonString}, {"asset", jsonString},
	{"amount", jsonMoney}, {"cid", jsonString}, {"user_id", jsonNumber}}

// POST /admin/v1/deposit {user_id, asset, amount, tx_ref}
var depositSchema = []jsonField{{"user_id", jsonNumber}, {"asset", jsonString}, {"amount", jsonMoney}, {"tx_ref", jsonString}}

// POST /admin/v1/funding/{user_id}/status {asset?, status}
var fundingStatusSchema = []jsonField{{"asset", jsonString}, {"status", jsonString}}

// POST /admin/v1/faults {adapter, op, mode, count}
var faultSchema = []jsonField{{"adapter", jsonString}, {"op", jsonString}, {"mode", jsonString}, {"count", jsonNumber}}

// transferCodeStatus is the HTTP status of a spec refusal; the rest are 400.
var transferCodeStatus = map[model.Code]int{
	model.CodeUnauthorized:        http.StatusUnauthorized,
	model.CodeForbidden:           http.StatusForbidden,
	model.CodeRateLimitExceeded:   http.StatusTooManyRequests,
	model.CodeDailyLimitExceeded:  http.StatusTooManyRequests,
	model.CodeDailyAmountExceeded: http.StatusTooManyRequests,
	model.CodeSystemError:         http.StatusInternalServerError,
	CodeTransfersHalted:           http.StatusServiceUnavailable,
	CodeServiceUnavailable:        http.StatusServiceUnavailable,
	model.CodeCoreHalted:          http.StatusServiceUnavailable,
	model.CodeTooManyOps:          http.StatusServiceUnavailable,
	model.CodeTooManyUsers:        http.StatusServiceUnavailable,
}

func (s *Server) transferError(op string, err error) *APIError {
	var te *model.Error
	if errors.As(err, &te) {
		st, ok := transferCodeStatus[te.Code]
		if !ok {
			st = http.StatusBadRequest
		}
		return &APIError{Status: st, Code: string(te.Code), Message: te.Message}
	}
	s.log.Error("gateway: transfer service failed", "op", op, "err", err)
	return &APIError{Status: http.StatusInternalServerError, Code: CodeSystemError, Message: "internal failure; retry later"}
}

// postTransfer: layer 1 runs the spec's request checks (1.5.1-1.5.4, 1.5.3)
// on what it can see; the coordinator runs all nine again (layer 2). The
// answer is 200 for COMMITTED, 202 while the transfer is still moving (its
// state is in the body; the recovery worker finishes it), and for FAILED or
// ROLLED_BACK the refusal's code as an error with the transfer attached. A
// repeated cid answers with the original transfer and "duplicate": true.
func (s *Server) postTransfer(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(transferSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(st.body, transferSchema, v, st.scratch); err != nil {
		return err
	}
	req := model.Request{From: string(v[0].b), To: string(v[1].b), Asset: string(v[2].b),
		Amount: string(v[3].b), CID: string(v[4].b)}
	if !v[3].set {
		return &APIError{Status: http.StatusBadRequest, Code: string(model.CodeInvalidAmount), Message: "amount is required"}
	}
	if v[4].set && len(v[4].b) == 0 {
		return &APIError{Status: http.StatusBadRequest, Code: string(model.CodeInvalidRequest), Message: "cid must not be empty"}
	}
	if v[5].set {
		u, ok := parseUserID(bstr(v[5].b))
		if !ok {
			return &APIError{Status: http.StatusForbidden, Code: string(model.CodeForbidden), Message: "user_id does not match the token"}
		}
		req.UserID = core.UserID(u)
	}
	caller := model.Caller{Authenticated: true, UserID: core.UserID(st.claims.UserID)}
	var asset *model.AssetConfig
	if a, ok := s.transfers.AssetConfig(req.Asset); ok {
		asset = &a
	}
	if _, e := model.CheckRequest(req, caller, asset, model.RateState{}, model.RateLimits{}); e != nil {
		return s.transferError("check", e)
	}
	c, cancel := context.WithTimeout(context.Background(), transferTimeout)
	defer cancel()
	res, cerr := s.transfers.Create(c, caller, req)
	if cerr != nil {
		// Create's contract: an error other than a refusal means no
		// transfer was recorded (issue 20): say so plainly.
		if e := s.transferError("create", cerr); e.Code != string(model.CodeSystemError) {
			return e
		}
		return &APIError{Status: http.StatusInternalServerError, Code: string(model.CodeSystemError),
			Message: "internal failure before the transfer was recorded: nothing happened, no funds moved; retry"}
	}
	t := res.Transfer
	if res.Unconfirmed {
		st.out = s.appendUnconfirmed(st.out[:0], &t)
		s.reply(ctx, st, http.StatusAccepted)
		return nil
	}
	b := st.out[:0]
	status := http.StatusOK
	switch {
	case t.State == transfer.Failed || t.State == transfer.RolledBack:
		code := transfer.FailureCode(t)
		status = http.StatusBadRequest
		if cs, ok := transferCodeStatus[model.Code(code)]; ok {
			status = cs // SYSTEM_ERROR: the system failed before anything moved
		}
		if code == string(transfer.CodeTransferFailed) {
			status = http.StatusConflict
		}
		b = append(b, `{"code":`...)
		b = appendStr(b, code)
		b = append(b, `,"message":`...)
		b = appendStr(b, "transfer "+t.State.String())
		b = append(b, ',')
	case !t.State.Terminal():
		status = http.StatusAccepted
		b = append(b, `{"message":"transfer in progress: poll GET /api/v1/internal_transfer/{req_id}",`...)
	default:
		b = append(b, `{"message":"transfer successful",`...)
	}
	if res.Duplicate {
		b = append(b, `"duplicate":true,`...)
	}
	b = s.appendTransferFields(b, &t)
	st.out = append(b, '}')
	s.reply(ctx, st, status)
	return nil
}

// appendUnconfirmed writes the 202 answer of a transfer whose record the
// database did not confirm (transfer.Result.Unconfirmed): its req_id and the
// request, state UNKNOWN. Polling the req_id tells: the transfer, or
// TRANSFER_NOT_FOUND, which then means nothing happened.
func (s *Server) appendUnconfirmed(b []byte, t *transfer.Transfer) []byte {
	b = append(b, `{"message":"transfer outcome unknown: the database did not confirm its record; poll GET /api/v1/internal_transfer/{req_id} (TRANSFER_NOT_FOUND there means nothing happened)",`...)
	b = s.appendTransferRequest(b, t)
	return append(b, `,"state":"UNKNOWN","state_id":null}`...)
}

// appendTransferFields writes the members of a transfer (spec §8.2 and
// more) without braces.
func (s *Server) appendTransferFields(b []byte, t *transfer.Transfer) []byte {
	b = append(b, `"transfer_id":`...)
	b = strconv.AppendInt(b, t.TransferID, 10)
	b = append(b, ',')
	b = s.appendTransferRequest(b, t)
	b = append(b, `,"state":`...)
	b = appendStr(b, t.State.String())
	b = append(b, `,"state_id":`...)
	b = strconv.AppendInt(b, int64(t.State), 10)
	b = append(b, `,"retry_count":`...)
	b = strconv.AppendInt(b, int64(t.RetryCount), 10)
	b = append(b, `,"error_message":`...)
	b = appendNameOrNull(b, t.ErrorMessage)
	if t.State == transfer.Failed || t.State == transfer.RolledBack {
		b = append(b, `,"failure_code":`...)
		b = appendStr(b, transfer.FailureCode(*t))
	}
	b = append(b, `,"created_at":`...)
	b = appendStr(b, t.CreatedAt.UTC().Format(time.RFC3339Nano))
	b = append(b, `,"updated_at":`...)
	b = appendStr(b, t.UpdatedAt.UTC().Format(time.RFC3339Nano))
	return b
}

// appendTransferRequest writes what the transfer was asked to do: req_id,
// cid, user_id, from, to, asset, amount (members, no braces).
func (s *Server) appendTransferRequest(b []byte, t *transfer.Transfer) []byte {
	a, ok := s.reg.AssetByID(t.Asset)
	b = append(b, `"req_id":`...)
	b = appendStr(b, t.ReqID)
	b = append(b, `,"cid":`...)
	b = appendNameOrNull(b, t.CID)
	b = append(b, `,"user_id":`...)
	b = appendUint(b, uint64(t.UserID))
	b = append(b, `,"from":`...)
	b = appendStr(b, string(t.From))
	b = append(b, `,"to":`...)
	b = appendStr(b, string(t.To))
	b = append(b, `,"asset":`...)
	if ok {
		b = appendStr(b, a.Symbol)
		b = append(b, `,"amount":`...)
		b = appendUnitsStr(b, int64(t.Amount), a.Scale)
	} else { // an asset removed from the config since: show its id and raw units
		b = appendStr(b, "#"+strconv.FormatUint(uint64(t.Asset), 10))
		b = append(b, `,"amount":`...)
		b = appendStr(b, strconv.FormatInt(int64(t.Amount), 10))
	}
	return b
}

// GET /api/v1/internal_transfer/{req_id}: the caller's own transfers only;
// anyone else's answer 404 like a missing one (no existence oracle).
func (s *Server) getTransfer(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	id := string(st.params[0])
	if !ulid.Valid(id) {
		return BadRequest(CodeInvalidParameter, "req_id must be a ULID")
	}
	c, cancel := context.WithTimeout(context.Background(), transferTimeout)
	defer cancel()
	t, err := s.transfers.Get(c, id)
	if errors.Is(err, transfer.ErrNotFound) || (err == nil && uint64(t.UserID) != st.claims.UserID) {
		return &APIError{Status: http.StatusNotFound, Code: "TRANSFER_NOT_FOUND", Message: "no such transfer"}
	}
	if err != nil {
		return s.transferError("get", err)
	}
	st.out = append(s.appendTransferFields(append(st.out[:0], '{'), &t), '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// GET /api/v1/internal_transfers?page=&size=: the caller's transfers, newest first.
func (s *Server) listTransfers(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	page, size, err := pageParams(ctx)
	if err != nil {
		return err
	}
	c, cancel := context.WithTimeout(context.Background(), transferTimeout)
	defer cancel()
	ts, total, lerr := s.transfers.List(c, core.UserID(st.claims.UserID), page, size)
	if lerr != nil {
		return s.transferError("list", lerr)
	}
	b := append(st.out[:0], `{"page":`...)
	b = strconv.AppendInt(b, int64(page), 10)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, int64(size), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, total, 10)
	b = append(b, `,"transfers":[`...)
	for i := range ts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(s.appendTransferFields(append(b, '{'), &ts[i]), '}')
	}
	st.out = append(b, "]}"...)
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// pageParams are ?page= (1-based) and ?size= (<= MaxTransferPageSize) of a history.
func pageParams(ctx *fasthttp.RequestCtx) (page, size int, err *APIError) {
	args := ctx.QueryArgs()
	if page, err = intParam(args, "page", 1, 1, 1_000_000); err != nil {
		return 0, 0, err
	}
	size, err = intParam(args, "size", DefaultTransferPageSize, 1, MaxTransferPageSize)
	return page, size, err
}

// intParam reads an optional integer query parameter within [lo, hi].
func intParam(args *fasthttp.Args, name string, def, lo, hi int) (int, *APIError) {
	raw := args.Peek(name)
	if raw == nil {
		return def, nil
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < lo || n > hi {
		return 0, BadRequest(CodeInvalidParameter, name+" must be an integer in "+strconv.Itoa(lo)+".."+strconv.Itoa(hi))
	}
	return n, nil
}

// POST /admin/v1/deposit {user_id, asset, amount, tx_ref}: an external
// deposit into FUNDING, once per tx_ref (a repeat answers "credited": false
// and changes nothing; the same tx_ref with other parameters is 409).
func (s *Server) deposit(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(depositSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(st.body, depositSchema, v, st.scratch); err != nil {
		return err
	}
	for i, f := range depositSchema {
		if !v[i].set {
			return missing(f.name)
		}
	}
	u, ok := parseUserID(bstr(v[0].b))
	if !ok {
		return BadRequest(CodeInvalidUser, "user_id must be a positive integer")
	}
	a, ok := s.reg.AssetBytes(v[1].b)
	if !ok {
		return BadRequest(CodeInvalidAsset, "unknown asset")
	}
	amount, perr := ParseUnits(bstr(v[2].b), a.Scale)
	if perr != nil {
		e, _ := AsAPIError(perr)
		return e
	}
	ref := string(v[3].b)
	if len(ref) == 0 || len(ref) > MaxTxRefLen || !printableASCII(ref) {
		return BadRequest(CodeInvalidKey, "tx_ref must be 1..128 printable ASCII characters")
	}
	c, cancel := context.WithTimeout(context.Background(), transferTimeout)
	defer cancel()
	credited, derr := s.transfers.Deposit(c, ref, core.UserID(u), a.ID, core.Units(amount))
	if errors.Is(derr, transfer.ErrDepositConflict) {
		return &APIError{Status: http.StatusConflict, Code: CodeDepositConflict, Message: "tx_ref already used with other parameters"}
	}
	if derr != nil {
		return s.transferError("deposit", derr)
	}
	s.log.Info("gateway: admin deposit", "admin", st.claims.UserID, "user_id", u, "asset", a.Symbol,
		"amount", FormatUnits(amount, a.Scale), "tx_ref", ref, "credited", credited)
	b := append(st.out[:0], `{"user_id":`...)
	b = appendUint(b, u)
	b = append(b, `,"asset":`...)
	b = appendStr(b, a.Symbol)
	b = append(b, `,"amount":`...)
	b = appendUnitsStr(b, amount, a.Scale)
	b = append(b, `,"tx_ref":`...)
	b = appendStr(b, ref)
	b = append(b, `,"credited":`...)
	b = appendBool(b, credited)
	st.out = append(b, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// POST /admin/v1/funding/{user_id}/status {asset?, status}: the status of
// one FUNDING account, or of all the user's when asset is absent.
func (s *Server) fundingStatus(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	u, ok := parseUserID(bstr(st.params[0]))
	if !ok {
		return BadRequest(CodeInvalidUser, "user_id must be a positive integer")
	}
	v := st.vals[:len(fundingStatusSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(st.body, fundingStatusSchema, v, st.scratch); err != nil {
		return err
	}
	if !v[1].set {
		return missing("status")
	}
	status := model.AccountStatus(v[1].b)
	if status != model.Active && status != model.Frozen && status != model.Disabled {
		return BadRequest(CodeInvalidStatus, "status must be ACTIVE, FROZEN or DISABLED")
	}
	var a Asset
	if v[0].set {
		if a, ok = s.reg.AssetBytes(v[0].b); !ok {
			return BadRequest(CodeInvalidAsset, "unknown asset")
		}
	}
	c, cancel := context.WithTimeout(context.Background(), transferTimeout)
	defer cancel()
	if serr := s.transfers.SetFundingStatus(c, core.UserID(u), a.ID, status); serr != nil {
		return s.transferError("funding status", serr)
	}
	s.log.Info("gateway: admin funding status", "admin", st.claims.UserID, "user_id", u, "asset", a.Symbol, "status", string(status))
	b := append(st.out[:0], `{"user_id":`...)
	b = appendUint(b, u)
	b = append(b, `,"asset":`...)
	b = appendNameOrNull(b, a.Symbol)
	b = append(b, `,"status":`...)
	b = appendStr(b, string(status))
	st.out = append(b, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// GET /admin/v1/invariants: runs the conservation check (spec §7.2) now.
func (s *Server) invariants(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	c, cancel := context.WithTimeout(context.Background(), transferTimeout)
	defer cancel()
	out, err := s.transfers.Invariants(c)
	if err != nil {
		return s.transferError("invariants", err)
	}
	st.out = append(st.out[:0], out...)
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// POST /admin/v1/transfers/resume: lifts a MON-003 halt of new transfers.
func (s *Server) resumeTransfers(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	c, cancel := context.WithTimeout(context.Background(), transferTimeout)
	defer cancel()
	out, err := s.transfers.ResumeTransfers(c)
	if err != nil {
		return s.transferError("resume", err)
	}
	s.log.Info("gateway: admin resumed internal transfers", "admin", st.claims.UserID)
	st.out = append(st.out[:0], out...)
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// POST /admin/v1/faults {adapter: funding|spot, op: withdraw|deposit|refund,
// mode, count}: the next count calls misbehave (tests only).
func (s *Server) injectFault(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(faultSchema)]
	var err *APIError
	if st.scratch, err = decodeObject(st.body, faultSchema, v, st.scratch); err != nil {
		return err
	}
	for i, f := range faultSchema {
		if !v[i].set {
			return missing(f.name)
		}
	}
	n, cerr := strconv.Atoi(string(v[3].b))
	if cerr != nil || n < 1 || n > 1_000_000 {
		return BadRequest(CodeInvalidParameter, "count must be an integer in 1..1000000")
	}
	adapter, op, mode := string(v[0].b), string(v[1].b), string(v[2].b)
	if ierr := s.faults.Inject(adapter, op, mode, n); ierr != nil {
		return BadRequest(CodeInvalidParameter, ierr.Error())
	}
	s.log.Warn("gateway: fault injected", "admin", st.claims.UserID, "adapter", adapter, "op", op, "mode", mode, "count", n)
	b := append(st.out[:0], `{"adapter":`...)
	b = appendStr(b, adapter)
	b = append(b, `,"op":`...)
	b = appendStr(b, op)
	b = append(b, `,"mode":`...)
	b = appendStr(b, mode)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	st.out = append(b, '}')
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// DELETE /admin/v1/faults: disarms every injected fault.
func (s *Server) clearFaults(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	s.faults.Clear()
	s.log.Warn("gateway: faults cleared", "admin", st.claims.UserID)
	st.out = append(st.out[:0], `{"cleared":true}`...)
	s.reply(ctx, st, http.StatusOK)
	return nil
}
