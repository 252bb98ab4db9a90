package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/withdraw"
)

// Withdrawals to a chain address (users) and the managed-transaction API of
// spec 002 (operators; poll only: no confirmation counts in any answer).
// Cold paths that wait on Postgres: they allocate freely.

// WithdrawalService is persist/withdraw.Service.
type WithdrawalService interface {
	Asset(symbol string) (withdraw.Asset, bool)
	Create(ctx context.Context, r withdraw.Request) (withdraw.Withdrawal, bool, error)
	Get(ctx context.Context, id int64) (withdraw.Withdrawal, error)
	List(ctx context.Context, u core.UserID, page, size int) ([]withdraw.Withdrawal, int64, error)
}

// TxManager is persist/chaintx.Manager.
type TxManager interface {
	Submitters() []chaintx.Address
	Create(ctx context.Context, n chaintx.NewTx) (chaintx.Tx, bool, error)
	Get(ctx context.Context, id chaintx.TxID) (chaintx.Tx, error)
	GetByRequest(ctx context.Context, s chaintx.Address, req string) (chaintx.Tx, error)
	Completions(ctx context.Context, after int64, limit int) ([]chaintx.Completion, error)
	Remediate(ctx context.Context, id chaintx.TxID, a chaintx.Action, reason string) (chaintx.Remediation, error)
}

// ChainConfig is the chain side of the server (--chain-rpc); nil: its routes do not exist.
type ChainConfig struct {
	Withdrawals  WithdrawalService
	Tx           TxManager
	Limits       WithdrawalLimits                      // per-user limits and allowlists (admin); nil: those routes answer 404
	ParseAddress func(string) (chaintx.Address, error) // strict (EIP-55 when mixed case)
	Checksum     func(chaintx.Address) string          // the EIP-55 form, for answers
	// CreateTimeout: how long POST /admin/v1/tx waits for the writer's
	// answer before it answers 202 UNKNOWN; 0: 30 s.
	CreateTimeout time.Duration
}

// Limits and codes of the chain endpoints.
const (
	MaxCompletionsPage = 1000
	maxGasLimit        = 30_000_000
	maxTxData          = 4096 // bytes of call data (the body limit binds first)
	chainTimeout       = 30 * time.Second
)

var (
	withdrawalSchema = []jsonField{{"asset", jsonString}, {"amount", jsonMoney}, {"address", jsonString}, {"cid", jsonString}}
	txSchema         = []jsonField{{"submitter", jsonString}, {"request_id", jsonString}, {"to", jsonString},
		{"value", jsonMoney}, {"data", jsonString}, {"gas_limit", jsonNumber}}
	remediateSchema = []jsonField{{"action", jsonString}, {"reason", jsonString}}
)

func (s *Server) chainError(op string, err error) *APIError {
	var we *withdraw.Error
	if errors.As(err, &we) {
		st := http.StatusBadRequest
		switch we.Code {
		case withdraw.CodeNotFound, withdraw.CodeAccountNotFound:
			st = http.StatusNotFound
		case withdraw.CodeInsufficientBalance, withdraw.CodeAccountFrozen, withdraw.CodeAccountDisabled,
			withdraw.CodeWithdrawalLimit, withdraw.CodeHotWalletShort:
			st = http.StatusConflict
		case withdraw.CodeAddressNotAllowed:
			st = http.StatusForbidden
		case withdraw.CodeHotWalletUnknown:
			st = http.StatusServiceUnavailable
		}
		return &APIError{Status: st, Code: string(we.Code), Message: we.Message}
	}
	for _, m := range []struct {
		err    error
		status int
		code   string
	}{
		{chaintx.ErrNotFound, http.StatusNotFound, "TX_NOT_FOUND"},
		{chaintx.ErrNotLeader, http.StatusServiceUnavailable, "NOT_LEADER"},
		{chaintx.ErrFenced, http.StatusServiceUnavailable, "NOT_LEADER"},
		{chaintx.ErrBusy, http.StatusServiceUnavailable, CodeSystemBusy},
		{chaintx.ErrStopped, http.StatusServiceUnavailable, CodeServiceUnavailable},
		{chaintx.ErrTxFinal, http.StatusConflict, "TX_FINAL"},
		{chaintx.ErrTxMined, http.StatusConflict, "TX_MINED"},
		{chaintx.ErrNoNonce, http.StatusConflict, "TX_NOT_ALLOCATED"},
		{chaintx.ErrNotStuck, http.StatusConflict, "TX_NOT_STUCK"},
		{chaintx.ErrNonceTaken, http.StatusConflict, "NONCE_TAKEN"},
		{chaintx.ErrNonceNotFinal, http.StatusConflict, "NONCE_NOT_FINAL"},
		{chaintx.ErrBadAction, http.StatusBadRequest, "INVALID_ACTION"},
		{chaintx.ErrNoSubmitter, http.StatusBadRequest, "UNKNOWN_SUBMITTER"},
		{chaintx.ErrRPCTimeout, http.StatusServiceUnavailable, "CHAIN_UNAVAILABLE"},
	} {
		if errors.Is(err, m.err) {
			return &APIError{Status: m.status, Code: m.code, Message: err.Error()}
		}
	}
	s.log.Error("gateway: chain service failed", "op", op, "err", err)
	return &APIError{Status: http.StatusInternalServerError, Code: CodeSystemError, Message: "internal failure; retry later"}
}

// idParam is the route's {id}: a positive integer.
func idParam(st *reqState) (int64, *APIError) {
	id, err := strconv.ParseInt(string(st.params[0]), 10, 64)
	if err != nil || id <= 0 {
		return 0, BadRequest(CodeInvalidParameter, "id must be a positive integer")
	}
	return id, nil
}

func chainCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), chainTimeout)
}

// POST /api/v1/withdrawals {asset, amount, address, cid?}: 202 with the
// PENDING withdrawal (FUNDING already debited); a repeated cid answers the
// first one with "duplicate": true.
func (s *Server) postWithdrawal(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(withdrawalSchema)]
	var aerr *APIError
	if st.scratch, aerr = decodeObject(st.body, withdrawalSchema, v, st.scratch); aerr != nil {
		return aerr
	}
	for i, name := range []string{"asset", "amount", "address"} {
		if !v[i].set {
			return BadRequest(CodeMissingField, name+" is required")
		}
	}
	if v[3].set && (len(v[3].b) == 0 || len(v[3].b) > 64) {
		return BadRequest(CodeInvalidParameter, "cid must be 1 to 64 bytes")
	}
	a, ok := s.chain.Withdrawals.Asset(string(v[0].b))
	if !ok {
		return BadRequest(string(withdraw.CodeInvalidAsset), "asset cannot be withdrawn to a chain")
	}
	amount, err := ParseUnits(string(v[1].b), uint8(a.Scale))
	if err != nil {
		return BadRequest(CodeInvalidAmount, "amount must be a positive decimal with at most the asset's decimals")
	}
	c, cancel := chainCtx()
	defer cancel()
	w, dup, err := s.chain.Withdrawals.Create(c, withdraw.Request{User: core.UserID(st.claims.UserID), Asset: a.Symbol,
		Amount: core.Units(amount), Address: string(v[2].b), CID: string(v[3].b)})
	var unconfirmed *withdraw.UnconfirmedError
	switch {
	case errors.As(err, &unconfirmed):
		s.log.Warn("gateway: withdrawal outcome unknown", "withdrawal_id", unconfirmed.ID, "err", err)
		return s.replyJSON(ctx, st, http.StatusAccepted, map[string]any{"withdrawal_id": unconfirmed.ID, "state": "UNKNOWN",
			"message": "withdrawal outcome unknown: the database did not confirm its record; poll GET /api/v1/withdrawals/{id} (WITHDRAWAL_NOT_FOUND there, once the database answers, means nothing happened)"})
	case errors.Is(err, withdraw.ErrNotRecorded):
		s.log.Error("gateway: withdrawal not recorded", "err", err)
		return &APIError{Status: http.StatusInternalServerError, Code: CodeSystemError,
			Message: "internal failure before the withdrawal was recorded: nothing happened, no funds moved; retry"}
	case err != nil:
		return s.chainError("withdraw", err)
	}
	return s.replyJSON(ctx, st, http.StatusAccepted, s.withdrawalJSON(w, dup))
}

// GET /api/v1/withdrawals/{id}: the caller's withdrawal (another user's: 404).
func (s *Server) getWithdrawal(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	id, perr := idParam(st)
	if perr != nil {
		return perr
	}
	c, cancel := chainCtx()
	defer cancel()
	w, gerr := s.chain.Withdrawals.Get(c, id)
	if gerr == nil && uint64(w.UserID) != st.claims.UserID {
		gerr = &withdraw.Error{Code: withdraw.CodeNotFound, Message: "no such withdrawal"}
	}
	if gerr != nil {
		return s.chainError("get withdrawal", gerr)
	}
	return s.replyJSON(ctx, st, http.StatusOK, s.withdrawalJSON(w, false))
}

// GET /api/v1/withdrawals?page=&size=: the caller's withdrawals, newest first.
func (s *Server) listWithdrawals(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	page, size, err := pageParams(ctx)
	if err != nil {
		return err
	}
	c, cancel := chainCtx()
	defer cancel()
	ws, total, lerr := s.chain.Withdrawals.List(c, core.UserID(st.claims.UserID), page, size)
	if lerr != nil {
		return s.chainError("list withdrawals", lerr)
	}
	out := map[string]any{"page": page, "size": size, "total": total, "withdrawals": []any{}}
	list := make([]any, 0, len(ws))
	for _, w := range ws {
		list = append(list, s.withdrawalJSON(w, false))
	}
	out["withdrawals"] = list
	return s.replyJSON(ctx, st, http.StatusOK, out)
}

func (s *Server) withdrawalJSON(w withdraw.Withdrawal, dup bool) map[string]any {
	amount := strconv.FormatInt(int64(w.Amount), 10)
	asset := "#" + strconv.FormatUint(uint64(w.Asset), 10)
	if a, ok := s.reg.AssetByID(w.Asset); ok {
		asset, amount = a.Symbol, FormatUnits(int64(w.Amount), a.Scale)
	}
	out := map[string]any{"withdrawal_id": w.ID, "user_id": uint64(w.UserID), "asset": asset, "amount": amount,
		"value_wei": w.ValueWei.String(), "address": s.chain.Checksum(w.Address), "cid": nullable(w.CID), "state": w.State,
		"tx_id": w.TxID, "tx_state": w.TxState, "tx_hash": nullable(string(w.TxHash)),
		"created_at": w.CreatedAt.UTC(), "updated_at": w.UpdatedAt.UTC()}
	if dup {
		out["duplicate"] = true
	}
	return out
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// POST /admin/v1/tx {submitter?, request_id?, to, value (wei), data? (0x hex), gas_limit?}:
// CreateTx; with request_id it is idempotent (a repeat answers the existing tx, 200, "duplicate": true).
// Without one the server assigns one ("auto-" + 32 hex digits), stored with
// the tx and shown in the answer (it deduplicates nothing: each call gets
// its own). An outcome not known in time (the writer still holds the
// request, or an unclassified failure) answers 202 UNKNOWN with the
// request_id: never a blind "retry" (spec 002 §3.10; issue 41).
func (s *Server) postTx(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(txSchema)]
	var aerr *APIError
	if st.scratch, aerr = decodeObject(st.body, txSchema, v, st.scratch); aerr != nil {
		return aerr
	}
	subs := s.chain.Tx.Submitters()
	n := chaintx.NewTx{Payload: chaintx.Payload{GasLimit: 21000}}
	switch {
	case v[0].set:
		a, err := s.chain.ParseAddress(string(v[0].b))
		if err != nil {
			return BadRequest(CodeInvalidParameter, "submitter: "+err.Error())
		}
		n.Submitter = a
	case len(subs) == 1:
		n.Submitter = subs[0]
	default:
		return BadRequest(CodeMissingField, "submitter is required")
	}
	if v[1].set {
		if len(v[1].b) == 0 || len(v[1].b) > 128 {
			return BadRequest(CodeInvalidParameter, "request_id must be 1 to 128 bytes")
		}
		n.RequestID = string(v[1].b)
	} else {
		n.RequestID, n.AssignedID = assignRequestID(), true
	}
	if !v[2].set || !v[3].set {
		return BadRequest(CodeMissingField, "to and value are required")
	}
	to, err := s.chain.ParseAddress(string(v[2].b))
	if err != nil {
		return BadRequest(CodeInvalidParameter, "to: "+err.Error())
	}
	n.Payload.To = to
	val, ok := new(big.Int).SetString(string(v[3].b), 10)
	if !ok || val.Sign() < 0 || val.BitLen() > 256 {
		return BadRequest(CodeInvalidAmount, "value must be a non-negative integer number of wei")
	}
	n.Payload.Value = val
	if v[4].set {
		d, err := hex.DecodeString(strings.TrimPrefix(string(v[4].b), "0x"))
		if err != nil || len(d) > maxTxData {
			return BadRequest(CodeInvalidParameter, "data must be 0x-prefixed hex, at most 4096 bytes")
		}
		n.Payload.Data = d
	}
	if v[5].set {
		g, err := strconv.ParseUint(string(v[5].b), 10, 64)
		if err != nil || g < 21000 || g > maxGasLimit {
			return BadRequest(CodeInvalidParameter, "gas_limit must be an integer in [21000, 30000000]")
		}
		n.Payload.GasLimit = g
	}
	d := s.chain.CreateTimeout
	if d <= 0 {
		d = chainTimeout
	}
	c, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	tx, existing, cerr := s.chain.Tx.Create(c, n)
	if cerr != nil {
		if ae := s.chainError("create tx", cerr); !errors.Is(cerr, chaintx.ErrOutcomeUnknown) && ae.Status != http.StatusInternalServerError {
			return ae // a refusal: nothing was created
		}
		s.log.Warn("gateway: tx creation outcome unknown", "submitter", n.Submitter, "request_id", n.RequestID, "err", cerr)
		return s.replyJSON(ctx, st, http.StatusAccepted, map[string]any{"state": "UNKNOWN",
			"submitter": s.chain.Checksum(n.Submitter), "request_id": n.RequestID,
			"message": "tx creation outcome unknown: it may still be allocated and sent; poll GET /admin/v1/tx/by-request " +
				"with this submitter and request_id (TX_NOT_FOUND there means not created yet); to retry, repeat the POST " +
				"with this request_id (idempotent), never without one"})
	}
	out := s.txJSON(tx)
	status := http.StatusCreated
	if existing {
		out["duplicate"], status = true, http.StatusOK
	}
	return s.replyJSON(ctx, st, status, out)
}

// assignRequestID is a request_id for a POST /admin/v1/tx that gave none:
// 128 random bits, so no caller's id or other call's can be the same.
func assignRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "auto-" + hex.EncodeToString(b[:])
}

// GET /admin/v1/tx/{id}
func (s *Server) getTx(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	id, perr := idParam(st)
	if perr != nil {
		return perr
	}
	c, cancel := chainCtx()
	defer cancel()
	tx, gerr := s.chain.Tx.Get(c, chaintx.TxID(id))
	if gerr != nil {
		return s.chainError("get tx", gerr)
	}
	return s.replyJSON(ctx, st, http.StatusOK, s.txJSON(tx))
}

// GET /admin/v1/tx/by-request?submitter=&request_id=
func (s *Server) getTxByRequest(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	args := ctx.QueryArgs()
	sub, err := s.chain.ParseAddress(string(args.Peek("submitter")))
	req := string(args.Peek("request_id"))
	if err != nil || req == "" {
		return BadRequest(CodeInvalidParameter, "submitter (an address) and request_id are required")
	}
	c, cancel := chainCtx()
	defer cancel()
	tx, gerr := s.chain.Tx.GetByRequest(c, sub, req)
	if gerr != nil {
		return s.chainError("get tx by request", gerr)
	}
	return s.replyJSON(ctx, st, http.StatusOK, s.txJSON(tx))
}

// GET /admin/v1/tx/completions?after=&limit=: the feed, in seq order.
func (s *Server) txCompletions(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if err := s.noBody(ctx, st); err != nil {
		return err
	}
	args := ctx.QueryArgs()
	after, err := intParam(args, "after", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := intParam(args, "limit", 100, 1, MaxCompletionsPage)
	if err != nil {
		return err
	}
	c, cancel := chainCtx()
	defer cancel()
	cs, cerr := s.chain.Tx.Completions(c, int64(after), limit)
	if cerr != nil {
		return s.chainError("completions", cerr)
	}
	list := make([]any, 0, len(cs))
	next := int64(after)
	for _, x := range cs {
		list = append(list, map[string]any{"seq": x.Seq, "tx_id": x.TxID, "submitter": s.chain.Checksum(x.Submitter),
			"request_id": nullable(x.RequestID), "status": x.State, "sub_state": nullable(x.SubState), "time": x.At.UTC()})
		next = x.Seq
	}
	return s.replyJSON(ctx, st, http.StatusOK, map[string]any{"completions": list, "next_after": next})
}

// POST /admin/v1/tx/{id}/remediate {action, reason}: the manual hook
// trigger, and RESOLVE_FOREIGN (persist/chaintx foreign.go).
func (s *Server) remediateTx(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(remediateSchema)]
	var aerr *APIError
	if st.scratch, aerr = decodeObject(st.body, remediateSchema, v, st.scratch); aerr != nil {
		return aerr
	}
	id, perr := idParam(st)
	if perr != nil {
		return perr
	}
	if !v[0].set || !v[1].set || len(v[1].b) == 0 || len(v[1].b) > 512 {
		return BadRequest(CodeMissingField, "action and reason (1 to 512 bytes) are required")
	}
	act, actErr := chaintx.ParseOperatorAction(string(v[0].b))
	if actErr != nil {
		return s.chainError("remediate", actErr)
	}
	c, cancel := chainCtx()
	defer cancel()
	// who and why, in the audit row's reason: "operator: admin <id>: <reason>"
	who := "admin " + strconv.FormatUint(st.claims.UserID, 10) + ": "
	s.log.Info("gateway: admin remediate", "admin", st.claims.UserID, "tx_id", id, "action", act)
	r, rerr := s.chain.Tx.Remediate(c, chaintx.TxID(id), act, who+string(v[1].b))
	if rerr != nil {
		return s.chainError("remediate", rerr)
	}
	return s.replyJSON(ctx, st, http.StatusOK, map[string]any{"tx_id": r.TxID, "nonce": r.Nonce, "action": r.Action,
		"node_id": r.NodeID, "fencing_token": r.FencingToken, "reason": r.Reason, "tx_hashes": r.Hashes, "time": r.At.UTC()})
}

// txJSON is a managed tx as answers show it: states only, no confirmation counts.
func (s *Server) txJSON(t chaintx.Tx) map[string]any {
	signed := make([]any, 0, len(t.Signed))
	for _, x := range t.Signed {
		signed = append(signed, map[string]any{"tx_hash": x.Hash, "kind": x.Kind})
	}
	out := map[string]any{"tx_id": t.ID, "submitter": s.chain.Checksum(t.Submitter), "request_id": nullable(t.RequestID),
		"nonce": t.Nonce, "to": s.chain.Checksum(t.Payload.To), "value": t.Payload.Value.String(),
		"data": "0x" + hex.EncodeToString(t.Payload.Data), "gas_limit": t.Payload.GasLimit, "tx_hash": nullable(string(t.Hash)),
		"state": t.State, "sub_state": nullable(t.SubState), "submit_attempts": t.SubmitAttempts,
		"last_error": nullable(t.LastError), "signed": signed, "mined_tx_hash": nil,
		"created_at": t.CreatedAt.UTC(), "updated_at": t.UpdatedAt.UTC(), "final_at": t.ConfirmedAt}
	if t.Receipt != nil {
		out["mined_tx_hash"] = t.Receipt.TxHash
	}
	return out
}
