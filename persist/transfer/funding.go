package transfer

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/transfer/ulid"
)

// Funding is the FUNDING ledger (balances_tb) and its adapter. Its
// operations (withdraw, deposit, refund) run only inside a Batcher's
// transactions, as the operation of a fused step (batch_fused.go): lock the
// balance row (SELECT ... FOR UPDATE), read the operation's record in
// transfer_operations, re-validate (decideOp), change the balance and
// record the outcome, with the transfer's transitions. The record's primary
// key (req_id, 'funding', op) makes a second effect impossible even for two
// concurrent first calls: the loser's insert conflicts and its whole
// transaction rolls back (and runs again, reading the record).
type Funding struct {
	pool *pgxpool.Pool
	b    *Batcher
}

// NewFunding returns the FUNDING adapter of b's (migrated) database.
func NewFunding(b *Batcher) *Funding { return &Funding{pool: b.pool, b: b} }

// checkParams is the adapter's own defense in depth (spec 9.3): it trusts
// no caller. A bad parameter is refused without a record: the same input is
// refused the same way every time.
func checkParams(reqID string, user UserID, asset AssetID, amount Units) *Outcome {
	var o Outcome
	switch {
	case !ulid.Valid(reqID):
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

// opFacts is what an operation's decision depends on, read under the
// balance row's lock: the row itself and, for some ops, one more fact.
type opFacts struct {
	row          balanceRow
	found        bool    // the (user, asset) row exists
	userExists   bool    // deposit with !found: the user has some FUNDING row
	withdraw     Outcome // refund: the recorded withdraw of the same req_id (readOp's answer)
	withdrawSeen bool
}

// decideOp is the adapter's decision, a pure function of what was read
// under the balance row's lock. An Unknown outcome is never recorded.
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
