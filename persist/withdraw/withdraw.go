package withdraw

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/pgstore"
	"github.com/ubscore/ubscore/persist/noeffect"
)

// State of a withdrawal.
type State string

const (
	Pending   State = "PENDING"   // debited; its managed tx is CREATED .. TRACKING, or STUCK
	Completed State = "COMPLETED" // its managed tx is CONFIRMED
	Cancelled State = "CANCELLED" // its managed tx is FAILED_FINAL; refunded to FUNDING
)

// Code is a refusal's stable code.
type Code string

const (
	CodeInvalidAsset        Code = "INVALID_ASSET"            // not withdrawable to a chain
	CodeInvalidAddress      Code = "INVALID_ADDRESS"          // malformed, zero, or a bad EIP-55 checksum
	CodeInvalidAmount       Code = "INVALID_AMOUNT"           // not positive
	CodeAmountTooSmall      Code = "AMOUNT_TOO_SMALL"         // below the asset's minimum
	CodeAmountTooLarge      Code = "AMOUNT_TOO_LARGE"         // above the asset's maximum
	CodeNotRepresentable    Code = "AMOUNT_NOT_REPRESENTABLE" // does not convert exactly to the chain's unit
	CodeAccountNotFound     Code = "ACCOUNT_NOT_FOUND"
	CodeAccountFrozen       Code = "ACCOUNT_FROZEN"
	CodeAccountDisabled     Code = "ACCOUNT_DISABLED"
	CodeInsufficientBalance Code = "INSUFFICIENT_BALANCE"
	CodeNotFound            Code = "WITHDRAWAL_NOT_FOUND"
	CodeWithdrawalLimit     Code = "WITHDRAWAL_LIMIT"        // the user's daily amount or count for the asset (limits.go)
	CodeAddressNotAllowed   Code = "ADDRESS_NOT_ALLOWED"     // not on the user's allowlist (limits.go)
	CodeHotWalletShort      Code = "HOT_WALLET_INSUFFICIENT" // the hot wallet cannot pay it now (hotwallet.go)
	CodeHotWalletUnknown    Code = "HOT_WALLET_UNKNOWN"      // the hot wallet's balance is not known (hotwallet.go)
)

// Error is a refusal: nothing changed.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

func refuse(c Code, format string, a ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, a...)}
}

// Asset is a withdrawable asset.
type Asset struct {
	Symbol        string
	ID            core.AssetID
	Scale         int        // the exchange's decimals (balances_tb units are 10^-Scale)
	ChainDecimals int        // the chain's decimals (18 for ETH: wei)
	Min, Max      core.Units // per withdrawal, exchange units; 0 = no bound
}

// ToChain converts exchange units to the chain's unit, exactly or not at all.
func (a Asset) ToChain(u core.Units) (*big.Int, bool) {
	v := big.NewInt(int64(u))
	d := a.ChainDecimals - a.Scale
	if d >= 0 {
		return v.Mul(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d)), nil)), true
	}
	q, r := new(big.Int).QuoRem(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-d)), nil), new(big.Int))
	return q, r.Sign() == 0 && q.Sign() > 0
}

// Withdrawal is one row of withdrawals, with its managed tx's public state.
type Withdrawal struct {
	ID        int64
	UserID    core.UserID
	Asset     core.AssetID
	Amount    core.Units // exchange units
	ValueWei  *big.Int   // chain units
	Address   chaintx.Address
	CID       string
	Submitter chaintx.Address
	TxID      chaintx.TxID
	State     State
	TxState   chaintx.State // the managed tx's state (no confirmation counts)
	TxHash    chaintx.Hash  // the mined tx's hash once known, else the original's ("" before ALLOCATED)
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Config wires a Service.
type Config struct {
	Pool      *pgxpool.Pool
	Submitter chaintx.Address // the hot wallet
	Assets    []Asset
	// ParseAddress validates a user's address (evm.ParseAddress).
	ParseAddress func(string) (chaintx.Address, error)
	// Nudge is told after a withdrawal is stored (Manager.Nudge); may be nil.
	Nudge func(chaintx.Address)
	// GasLimit of a withdrawal tx; default 21000 (a plain value transfer:
	// contract recipients that need more gas revert, and are refunded).
	GasLimit uint64
	// SettleWait bounds how long Create keeps trying to settle a commit of
	// unknown outcome before answering *UnconfirmedError; default 10 s.
	SettleWait time.Duration
	// Limits are the default daily limits per asset (flags); a user's row
	// of withdrawal_limits overrides them. Missing: no limit.
	Limits map[core.AssetID]Limit
	// HotWallet, if set, refuses withdrawals the hot wallet cannot pay.
	HotWallet *HotWallet
	// Fault injects a lost commit answer (tests only; zero in production).
	Fault Fault
}

// Fault is an injectable failure of Create's commit (tests only).
type Fault uint8

const (
	FaultNone       Fault = iota
	FaultCommitLost       // the commit happens, then its answer is lost (an unknown outcome)
	FaultCommitDied       // the connection dies before the commit (rolled back; the outcome looks unknown)
)

// ErrNotRecorded: Create failed and nothing happened (no withdrawal, no
// debit), for certain; retrying is safe.
var ErrNotRecorded = errors.New("withdraw: not recorded: nothing happened, no funds moved")

// UnconfirmedError: the database did not confirm Create's commit and could
// not be asked since. Withdrawal ID may exist or never will: poll it (once
// the database answers, WITHDRAWAL_NOT_FOUND there means nothing happened).
type UnconfirmedError struct {
	ID    int64
	Cause error
}

func (e *UnconfirmedError) Error() string {
	return fmt.Sprintf("withdraw: withdrawal %d: outcome unknown: %v", e.ID, e.Cause)
}

func (e *UnconfirmedError) Unwrap() error { return e.Cause }

// Service creates and reads withdrawals.
type Service struct {
	cfg   Config
	bySym map[string]Asset
	byID  map[core.AssetID]Asset
}

// New returns the service.
func New(cfg Config) *Service {
	if cfg.GasLimit == 0 {
		cfg.GasLimit = 21000
	}
	s := &Service{cfg: cfg, bySym: map[string]Asset{}, byID: map[core.AssetID]Asset{}}
	for _, a := range cfg.Assets {
		s.bySym[a.Symbol], s.byID[a.ID] = a, a
	}
	return s
}

// Asset returns the withdrawable asset of a symbol.
func (s *Service) Asset(sym string) (Asset, bool) { a, ok := s.bySym[sym]; return a, ok }

// AssetByID returns the withdrawable asset of an id.
func (s *Service) AssetByID(id core.AssetID) (Asset, bool) { a, ok := s.byID[id]; return a, ok }

// Request is a user's withdrawal request (amount already parsed at the asset's scale).
type Request struct {
	User    core.UserID
	Asset   string
	Amount  core.Units
	Address string
	CID     string // optional idempotency key
}

// Create validates, debits FUNDING and stores the withdrawal with its
// CREATED managed tx in one transaction. Before the debit, in the same
// transaction: the allowlist, the daily limits, and after it the hot
// wallet check; any refusal rolls everything back (nothing debited). A repeated cid answers the first
// withdrawal with duplicate = true (whatever the other fields say).
func (s *Service) Create(ctx context.Context, r Request) (w Withdrawal, duplicate bool, err error) {
	a, ok := s.bySym[r.Asset]
	if !ok {
		return w, false, refuse(CodeInvalidAsset, "asset %q cannot be withdrawn to a chain", r.Asset)
	}
	addr, perr := s.cfg.ParseAddress(r.Address)
	if perr != nil {
		return w, false, refuse(CodeInvalidAddress, "%v", perr)
	}
	switch {
	case r.Amount <= 0:
		return w, false, refuse(CodeInvalidAmount, "amount must be positive")
	case a.Min > 0 && r.Amount < a.Min:
		return w, false, refuse(CodeAmountTooSmall, "below the minimum withdrawal")
	case a.Max > 0 && r.Amount > a.Max:
		return w, false, refuse(CodeAmountTooLarge, "above the maximum withdrawal")
	}
	wei, exact := a.ToChain(r.Amount)
	if !exact {
		return w, false, refuse(CodeNotRepresentable, "amount is not a whole number of the chain's smallest unit")
	}
	if r.CID != "" {
		if w, err := s.byCID(ctx, r.User, r.CID); err == nil {
			return w, true, nil
		} else if !errors.Is(err, errNone) {
			return w, false, err
		}
	}
	// The id comes first, outside the transaction, so that a commit of
	// unknown outcome can be settled by it (settle). Its failure is
	// "nothing happened" by position, whatever the error: no statement of
	// the withdrawal was sent yet (at most a sequence value is used up).
	var id int64
	if err := s.cfg.Pool.QueryRow(ctx, `SELECT nextval('withdrawals_id_seq')`).Scan(&id); err != nil {
		return w, false, fmt.Errorf("%w: %v", ErrNotRecorded, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO withdrawal_claims (withdrawal_id, fenced) VALUES ($1, false)`, id); err != nil {
			return err
		}
		if err := checkAllowlist(ctx, tx, r.User, addr); err != nil {
			return err
		}
		if err := s.takeQuota(ctx, tx, r.User, a.ID, r.Amount); err != nil {
			return err
		}
		if err := debit(ctx, tx, r.User, a.ID, r.Amount); err != nil {
			return err
		}
		if h := s.cfg.HotWallet; h != nil { // last: its lock is the wallet's, held to the commit
			if err := h.check(ctx, tx, wei, s.cfg.GasLimit); err != nil {
				return err
			}
		}
		txID, err := pgstore.InsertCreated(ctx, tx, chaintx.NewTx{Submitter: s.cfg.Submitter, RequestID: "wd-" + strconv.FormatInt(id, 10),
			Payload: chaintx.Payload{To: addr, Value: wei, GasLimit: s.cfg.GasLimit}})
		if err != nil {
			return err
		}
		var cid *string
		if r.CID != "" {
			cid = &r.CID
		}
		_, err = tx.Exec(ctx, `INSERT INTO withdrawals (withdrawal_id, user_id, asset_id, amount, value_wei, address, cid, submitter, tx_id, state)
			VALUES ($1, $2, $3, $4, $5::numeric, $6, $7, $8, $9, 'PENDING')`,
			id, int64(r.User), int32(a.ID), int64(r.Amount), wei.String(), string(addr), cid, string(s.cfg.Submitter), int64(txID))
		return err
	})
	var pgErr *pgconn.PgError
	if noeffect.RolledBack(err) && errors.As(err, &pgErr) && pgErr.Code == "23505" && r.CID != "" { // a concurrent request with the same cid won
		w, err := s.byCID(ctx, r.User, r.CID)
		return w, err == nil, err
	}
	var refusal *Error
	switch {
	case errors.As(err, &refusal):
		return w, false, err
	case err != nil && noeffect.Proven(err):
		// A Postgres ERROR that rolled the transaction back, or nothing
		// sent (one rule: package noeffect). A FATAL — on COMMIT or on any
		// statement — or a broken connection proves nothing: settle.
		return w, false, fmt.Errorf("%w: %v", ErrNotRecorded, err)
	case err != nil:
		if err = s.settle(ctx, id, err); err != nil {
			return w, false, err
		}
	}
	if s.cfg.Nudge != nil {
		s.cfg.Nudge(s.cfg.Submitter)
	}
	w, err = s.getCreated(ctx, id)
	return w, false, err
}

// getCreated reads withdrawal id, which exists (Create committed it or
// settled it as committed): never a bare error, after which a client
// without a cid would retry and withdraw twice. If the database does not
// answer within SettleWait: *UnconfirmedError with the id to poll.
func (s *Service) getCreated(ctx context.Context, id int64) (Withdrawal, error) {
	wait := s.cfg.SettleWait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(wait)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		w, err := s.Get(cctx, id)
		cancel()
		if err == nil {
			return w, nil
		}
		if time.Now().Add(backoff).After(deadline) {
			return w, &UnconfirmedError{ID: id, Cause: err}
		}
		time.Sleep(backoff)
	}
}

// inTx runs fn in one transaction and commits it, with Config.Fault applied
// to the commit.
func (s *Service) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.cfg.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit: a no-op
	if err := fn(tx); err != nil {
		return err
	}
	switch s.cfg.Fault {
	case FaultCommitLost:
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		return errors.New("injected: connection lost after COMMIT was sent")
	case FaultCommitDied:
		return errors.New("injected: connection lost before COMMIT was answered")
	}
	return tx.Commit(ctx)
}

// settle decides the withdrawal id whose commit had an unknown outcome
// (cause) by claiming id as fenced (migration 0039): the claim conflicts
// with the committed one (nil: the withdrawal exists), or it wins (then the
// original transaction can never commit: ErrNotRecorded). If the database
// does not answer within SettleWait: *UnconfirmedError.
func (s *Service) settle(ctx context.Context, id int64, cause error) error {
	wait := s.cfg.SettleWait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(wait)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var fenced bool
		err := s.cfg.Pool.QueryRow(cctx, `WITH ins AS (
				INSERT INTO withdrawal_claims (withdrawal_id, fenced) VALUES ($1, true)
				ON CONFLICT (withdrawal_id) DO NOTHING RETURNING fenced)
			SELECT fenced FROM ins UNION ALL SELECT fenced FROM withdrawal_claims WHERE withdrawal_id = $1`, id).Scan(&fenced)
		cancel()
		switch {
		case err == nil && fenced:
			return fmt.Errorf("%w: fenced withdrawal %d after an unknown commit (%v)", ErrNotRecorded, id, cause)
		case err == nil:
			return nil
		}
		if time.Now().Add(backoff).After(deadline) {
			return &UnconfirmedError{ID: id, Cause: cause}
		}
		time.Sleep(backoff)
	}
}

// debit takes amount from the user's ACTIVE FUNDING account, or refuses.
func debit(ctx context.Context, tx pgx.Tx, user core.UserID, asset core.AssetID, amount core.Units) error {
	var status string
	var avail int64
	err := tx.QueryRow(ctx, `SELECT status, available FROM balances_tb WHERE user_id = $1 AND asset_id = $2 FOR UPDATE`,
		int64(user), int32(asset)).Scan(&status, &avail)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return refuse(CodeAccountNotFound, "no FUNDING account for this asset")
	case err != nil:
		return err
	case status == "FROZEN":
		return refuse(CodeAccountFrozen, "FUNDING account frozen")
	case status == "DISABLED":
		return refuse(CodeAccountDisabled, "FUNDING account disabled")
	case avail < int64(amount):
		return refuse(CodeInsufficientBalance, "insufficient FUNDING balance")
	}
	_, err = tx.Exec(ctx, `UPDATE balances_tb SET available = available - $3, version = version + 1, updated_at = now()
		WHERE user_id = $1 AND asset_id = $2`, int64(user), int32(asset), int64(amount))
	return err
}

var errNone = errors.New("withdraw: none")

const cols = `w.withdrawal_id, w.user_id, w.asset_id, w.amount, w.value_wei::text, w.address, COALESCE(w.cid, ''), w.submitter,
	w.tx_id, w.state, m.state, COALESCE(m.receipt_hash, m.tx_hash, ''), w.created_at, w.updated_at`

func scan(r pgx.CollectableRow) (Withdrawal, error) {
	var w Withdrawal
	var wei string
	err := r.Scan(&w.ID, &w.UserID, &w.Asset, &w.Amount, &wei, &w.Address, &w.CID, &w.Submitter, &w.TxID, &w.State,
		&w.TxState, &w.TxHash, &w.CreatedAt, &w.UpdatedAt)
	w.ValueWei, _ = new(big.Int).SetString(wei, 10)
	return w, err
}

func (s *Service) query(ctx context.Context, where string, args ...any) ([]Withdrawal, error) {
	rows, err := s.cfg.Pool.Query(ctx, `SELECT `+cols+` FROM withdrawals w JOIN managed_tx m ON m.tx_id = w.tx_id `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("withdraw: %w", err)
	}
	return pgx.CollectRows(rows, scan)
}

func first(ws []Withdrawal, err error) (Withdrawal, error) {
	if err != nil {
		return Withdrawal{}, err
	}
	if len(ws) == 0 {
		return Withdrawal{}, errNone
	}
	return ws[0], nil
}

func (s *Service) byCID(ctx context.Context, u core.UserID, cid string) (Withdrawal, error) {
	return first(s.query(ctx, `WHERE w.user_id = $1 AND w.cid = $2`, int64(u), cid))
}

// Get returns a withdrawal (refusal WITHDRAWAL_NOT_FOUND if none).
func (s *Service) Get(ctx context.Context, id int64) (Withdrawal, error) {
	w, err := first(s.query(ctx, `WHERE w.withdrawal_id = $1`, id))
	if errors.Is(err, errNone) {
		return w, refuse(CodeNotFound, "no such withdrawal")
	}
	return w, err
}

// List returns a page (1-based) of the user's withdrawals, newest first, and their total.
func (s *Service) List(ctx context.Context, u core.UserID, page, size int) ([]Withdrawal, int64, error) {
	var total int64
	if err := s.cfg.Pool.QueryRow(ctx, `SELECT count(*) FROM withdrawals WHERE user_id = $1`, int64(u)).Scan(&total); err != nil {
		return nil, 0, err
	}
	ws, err := s.query(ctx, `WHERE w.user_id = $1 ORDER BY w.withdrawal_id DESC LIMIT $2 OFFSET $3`, int64(u), size, (page-1)*size)
	return ws, total, err
}
