package transfer

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/transfer/model"
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

// errorOutcome maps an infrastructure error to an unknown outcome: the
// transaction may or may not have committed (the commit's answer can be
// lost), so the caller must retry, never compensate.
func errorOutcome(ctx context.Context, err error) model.Outcome {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return model.Outcome{Kind: model.Timeout, Code: err.Error()}
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) && pgconn.SafeToRetry(err) {
		return model.Outcome{Kind: model.NetworkError, Code: err.Error()}
	}
	return model.UnknownOutcome(err.Error())
}

// opFacts is what an operation's decision depends on, read under the
// balance row's lock: the row itself and, for some ops, one more fact.
type opFacts struct {
	row          balanceRow
	found        bool          // the (user, asset) row exists
	userExists   bool          // deposit with !found: the user has some FUNDING row
	withdraw     model.Outcome // refund: the recorded withdraw of the same req_id (readOp's answer)
	withdrawSeen bool
}

// decideOp is the adapter's decision, a pure function of what was read
// under the balance row's lock. An Unknown outcome is never recorded.
func decideOp(op model.Op, amount Units, k opFacts) (model.Outcome, Units) {
	row, found := k.row, k.found
	switch op {
	case model.OpWithdraw:
		switch {
		case !found:
			return model.Fail(model.CodeSourceAccountNotFound), 0
		case row.status == model.Frozen:
			return model.Fail(model.CodeAccountFrozen), 0
		case row.status == model.Disabled:
			return model.Fail(model.CodeAccountDisabled), 0
		case row.available < amount:
			return model.Fail(model.CodeInsufficientBalance), 0
		}
		return model.OK(), -amount
	case model.OpDeposit:
		if !found {
			if !k.userExists {
				return model.Fail(model.CodeTargetAccountNotFound), 0
			}
		} else if row.status == model.Disabled {
			return model.Fail(model.CodeAccountDisabled), 0
		}
		if row.available > MaxUnitsBalance-amount {
			return model.Fail(model.CodeOverflow), 0
		}
		return model.OK(), amount
	case model.OpRefund:
		if !k.withdrawSeen || k.withdraw.Kind != model.Success || !found {
			return model.Fail(model.CodeRefundWithoutWithdraw), 0
		}
		if row.available > MaxUnitsBalance-amount {
			return model.UnknownOutcome(string(model.CodeOverflow)), 0 // cannot refuse a refund: retry, alert
		}
		return model.OK(), amount
	}
	return model.UnknownOutcome("unknown op " + string(op)), 0
}

// MaxUnitsBalance is the largest FUNDING balance of one row, asset units.
const MaxUnitsBalance = Units(1<<63 - 1)

type balanceRow struct {
	available Units
	status    model.AccountStatus
}
