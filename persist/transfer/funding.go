package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Funding is the FUNDING ledger (balances_tb) and its adapter. Each
// operation is ONE transaction: lock the balance row (SELECT ... FOR
// UPDATE), read the operation's record in transfer_operations, re-validate,
// change the balance and record the outcome. The record's primary key
// (req_id, 'funding', op) makes a second effect impossible even for two
// concurrent first calls: the loser's insert conflicts and its whole
// transaction, balance change included, rolls back.
type Funding struct {
	pool *pgxpool.Pool
	b    *Batcher // nil: each operation is a transaction of its own
}

// NewFunding returns the FUNDING adapter on a migrated database.
func NewFunding(pool *pgxpool.Pool) *Funding { return &Funding{pool: pool} }

// NewFundingBatched returns the FUNDING adapter whose Withdraw, Deposit and
// Refund run in b's shared transactions (batch.go, batch_funding.go), with
// the same outcomes; the ledger's other methods stay direct.
func NewFundingBatched(pool *pgxpool.Pool, b *Batcher) *Funding { return &Funding{pool: pool, b: b} }

var _ Adapter = (*Funding)(nil)

// Withdraw debits the user's FUNDING balance once per req_id.
func (f *Funding) Withdraw(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return f.apply(ctx, OpWithdraw, reqID, user, asset, amount)
}

// Deposit credits the user's FUNDING balance once per req_id.
func (f *Funding) Deposit(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return f.apply(ctx, OpDeposit, reqID, user, asset, amount)
}

// Refund credits back a successful Withdraw of the same req_id, once.
func (f *Funding) Refund(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return f.apply(ctx, OpRefund, reqID, user, asset, amount)
}

// checkParams is the adapter's own defense in depth (spec 9.3): it trusts
// no caller. A bad parameter is refused without a record: the same input is
// refused the same way every time.
func checkParams(reqID string, user UserID, asset AssetID, amount Units) *Outcome {
	var o Outcome
	switch {
	case !ValidULID(reqID):
		o = unknown("invalid req_id") // a caller bug, never a reason to compensate
	case user == 0:
		o = fail(CodeForbidden)
	case asset == 0:
		o = fail(CodeInvalidAsset)
	case amount <= 0 || amount > MaxTransferUnits:
		o = fail(CodeInvalidAmount)
	default:
		return nil
	}
	return &o
}

func (f *Funding) apply(ctx context.Context, op Op, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	if o := checkParams(reqID, user, asset, amount); o != nil {
		return *o
	}
	if f.b != nil {
		a := f.b.do(&batchReq{kind: kindFunding, ctx: ctx, op: op, reqID: reqID, user: user, asset: asset, amount: amount})
		if a.err != nil {
			return errorOutcome(ctx, a.err)
		}
		return a.out
	}
	var out Outcome
	err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		var err error
		out, err = f.applyTx(ctx, tx, op, reqID, user, asset, amount)
		return err
	})
	if err != nil {
		return errorOutcome(ctx, err)
	}
	return out
}

// errorOutcome maps an infrastructure error to an unknown outcome: the
// transaction may or may not have committed (the commit's answer can be
// lost), so the caller must retry, never compensate.
func errorOutcome(ctx context.Context, err error) Outcome {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return Outcome{Kind: Timeout, Code: err.Error()}
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) && pgconn.SafeToRetry(err) {
		return Outcome{Kind: NetworkError, Code: err.Error()}
	}
	return unknown(err.Error())
}

// applyTx runs inside the operation's transaction. A returned error rolls
// it back; an Outcome with a nil error commits (the balance change, if any,
// and the record).
func (f *Funding) applyTx(ctx context.Context, tx pgx.Tx, op Op, reqID string, user UserID, asset AssetID, amount Units) (Outcome, error) {
	row, found, err := lockBalance(ctx, tx, user, asset)
	if err != nil {
		return Outcome{}, err
	}
	// Read the record after taking the row lock: a concurrent first call
	// that held the lock has committed by now, and this statement sees it.
	if prev, seen, err := readOp(ctx, tx, reqID, op, user, asset, amount); err != nil || seen {
		return prev, err
	}
	decided, delta := f.decide(ctx, tx, op, reqID, user, asset, amount, row, found)
	if decided.Kind == Unknown {
		return decided, nil // not recorded: nothing was decided
	}
	if decided.Kind == Success {
		if err := changeBalance(ctx, tx, user, asset, delta, found); err != nil {
			return Outcome{}, err
		}
	}
	if err := recordOp(ctx, tx, reqID, op, user, asset, amount, decided); err != nil {
		return Outcome{}, err
	}
	return decided, nil
}

// decide re-validates the operation against the locked row (spec 1.5.5 at
// the adapter) and returns the outcome and the balance change it implies.
// It reads what decideOp needs to know, and only that.
func (f *Funding) decide(ctx context.Context, tx pgx.Tx, op Op, reqID string, user UserID, asset AssetID,
	amount Units, row balanceRow, found bool) (Outcome, Units) {
	k := opFacts{row: row, found: found}
	switch {
	case op == OpDeposit && !found:
		exists, err := accountExists(ctx, tx, user)
		if err != nil {
			return unknown(err.Error()), 0
		}
		k.userExists = exists
	case op == OpRefund:
		w, seen, err := readOp(ctx, tx, reqID, OpWithdraw, user, asset, amount)
		if err != nil {
			return unknown(err.Error()), 0
		}
		k.withdraw, k.withdrawSeen = w, seen
	}
	return decideOp(op, amount, k)
}

// opFacts is what an operation's decision depends on, read under the
// balance row's lock: the row itself and, for some ops, one more fact.
type opFacts struct {
	row          balanceRow
	found        bool    // the (user, asset) row exists
	userExists   bool    // deposit with !found: the user has some FUNDING row
	withdraw     Outcome // refund: the recorded withdraw of the same req_id (readOp's answer)
	withdrawSeen bool
}

// decideOp is the adapter's decision, a pure function shared by the
// one-transaction path (decide) and the Batcher, so both refuse and accept
// exactly the same operations with the same codes. An Unknown outcome is
// never recorded.
func decideOp(op Op, amount Units, k opFacts) (Outcome, Units) {
	row, found := k.row, k.found
	switch op {
	case OpWithdraw:
		switch {
		case !found:
			return fail(CodeSourceAccountNotFound), 0
		case row.status == Frozen:
			return fail(CodeAccountFrozen), 0
		case row.status == Disabled:
			return fail(CodeAccountDisabled), 0
		case row.available < amount:
			return fail(CodeInsufficientBalance), 0
		}
		return ok(), -amount
	case OpDeposit:
		if !found {
			if !k.userExists {
				return fail(CodeTargetAccountNotFound), 0
			}
		} else if row.status == Disabled {
			return fail(CodeAccountDisabled), 0
		}
		if row.available > MaxUnitsBalance-amount {
			return fail(CodeOverflow), 0
		}
		return ok(), amount
	case OpRefund:
		if !k.withdrawSeen || k.withdraw.Kind != Success || !found {
			return fail(CodeRefundWithoutWithdraw), 0
		}
		if row.available > MaxUnitsBalance-amount {
			return unknown(string(CodeOverflow)), 0 // cannot refuse a refund: retry, alert
		}
		return ok(), amount
	}
	return unknown("unknown op " + string(op)), 0
}

// MaxUnitsBalance is the largest FUNDING balance of one row, asset units.
const MaxUnitsBalance = Units(1<<63 - 1)

type balanceRow struct {
	available Units
	status    AccountStatus
}

func lockBalance(ctx context.Context, tx pgx.Tx, user UserID, asset AssetID) (balanceRow, bool, error) {
	var r balanceRow
	var status string
	err := tx.QueryRow(ctx, `SELECT available, status FROM balances_tb
		WHERE user_id = $1 AND asset_id = $2 FOR UPDATE`, int64(user), int32(asset)).Scan(&r.available, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return balanceRow{status: Active}, false, nil
	}
	r.status = AccountStatus(status)
	return r, err == nil, err
}

func accountExists(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, user UserID) (bool, error) {
	var exists bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM balances_tb WHERE user_id = $1)`, int64(user)).Scan(&exists)
	return exists, err
}

func changeBalance(ctx context.Context, tx pgx.Tx, user UserID, asset AssetID, delta Units, found bool) error {
	if !found { // a deposit into a FUNDING account that lacks this asset's row
		_, err := tx.Exec(ctx, `INSERT INTO balances_tb (user_id, asset_id, available) VALUES ($1, $2, $3)`,
			int64(user), int32(asset), int64(delta))
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE balances_tb SET available = available + $3, version = version + 1, updated_at = now()
		WHERE user_id = $1 AND asset_id = $2`, int64(user), int32(asset), int64(delta))
	return err
}

// readOp returns the recorded first outcome of (req_id, op). A record with
// other parameters is a coordinator bug: UNKNOWN (retry and alert), never a
// business failure that could trigger compensation.
func readOp(ctx context.Context, tx pgx.Tx, reqID string, op Op, user UserID, asset AssetID, amount Units) (Outcome, bool, error) {
	var result, code string
	var u int64
	var a int32
	var amt Units
	err := tx.QueryRow(ctx, `SELECT result, COALESCE(code, ''), user_id, asset_id, amount FROM transfer_operations
		WHERE req_id = $1 AND adapter = 'funding' AND op = $2`, reqID, string(op)).Scan(&result, &code, &u, &a, &amt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Outcome{}, false, nil
	}
	if err != nil {
		return Outcome{}, false, err
	}
	if UserID(u) != user || AssetID(a) != asset || amt != amount {
		return unknown(string(CodeReqIDConflict)), true, nil
	}
	if result == "SUCCESS" {
		return ok(), true, nil
	}
	return Outcome{Kind: ExplicitFail, Code: code}, true, nil
}

func recordOp(ctx context.Context, tx pgx.Tx, reqID string, op Op, user UserID, asset AssetID, amount Units, o Outcome) error {
	result, code := "SUCCESS", any(nil)
	if o.Kind == ExplicitFail {
		result, code = "EXPLICIT_FAIL", o.Code
	}
	_, err := tx.Exec(ctx, `INSERT INTO transfer_operations (req_id, adapter, op, result, code, user_id, asset_id, amount)
		VALUES ($1, 'funding', $2, $3, $4, $5, $6, $7)`, reqID, string(op), result, code, int64(user), int32(asset), int64(amount))
	if err != nil {
		return fmt.Errorf("transfer: record %s %s: %w", op, reqID, err)
	}
	return nil
}
