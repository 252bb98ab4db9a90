package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// ErrDepositConflict: a tx_ref already recorded with other parameters.
var ErrDepositConflict = errors.New("transfer: deposit tx_ref reused with other parameters")

// ExternalDeposit credits an external deposit (on-chain, bank) into FUNDING,
// once per txRef, creating the balance row (and so the FUNDING account) on
// the first deposit. credited=false: txRef was already applied.
func (f *Funding) ExternalDeposit(ctx context.Context, txRef string, user UserID, asset AssetID, amount Units) (credited bool, err error) {
	if txRef == "" || len(txRef) > 128 || user == 0 || asset == 0 || amount <= 0 {
		return false, model.Reject(model.CodeInvalidRequest, "bad deposit parameters")
	}
	err = pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO funding_deposits (tx_ref, user_id, asset_id, amount)
			VALUES ($1, $2, $3, $4) ON CONFLICT (tx_ref) DO NOTHING`, txRef, int64(user), int32(asset), int64(amount))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var u int64
			var a int32
			var amt Units
			if err := tx.QueryRow(ctx, `SELECT user_id, asset_id, amount FROM funding_deposits WHERE tx_ref = $1`,
				txRef).Scan(&u, &a, &amt); err != nil {
				return err
			}
			if UserID(u) != user || AssetID(a) != asset || amt != amount {
				return ErrDepositConflict
			}
			return nil
		}
		credited = true
		_, err = tx.Exec(ctx, `INSERT INTO balances_tb (user_id, asset_id, available) VALUES ($1, $2, $3)
			ON CONFLICT (user_id, asset_id) DO UPDATE
			SET available = balances_tb.available + EXCLUDED.available, version = balances_tb.version + 1, updated_at = now()`,
			int64(user), int32(asset), int64(amount))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("transfer: external deposit %s: %w", txRef, err)
	}
	return credited, nil
}

// SetStatus sets the status of the user's FUNDING row for asset.
func (f *Funding) SetStatus(ctx context.Context, user UserID, asset AssetID, st model.AccountStatus) error {
	tag, err := f.pool.Exec(ctx, `UPDATE balances_tb SET status = $3, version = version + 1, updated_at = now()
		WHERE user_id = $1 AND asset_id = $2`, int64(user), int32(asset), string(st))
	if err != nil {
		return fmt.Errorf("transfer: set status: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

var _ model.AccountReader = (*Funding)(nil)

// AccountState reads the user's FUNDING account for asset, without locks
// (validation only; the operation re-checks under FOR UPDATE), shared with
// concurrent calls: one statement per batch (batch_read.go).
func (f *Funding) AccountState(ctx context.Context, user UserID, asset AssetID) (model.AccountState, error) {
	st, err := f.b.account(ctx, user, asset)
	if err != nil {
		return st, fmt.Errorf("transfer: funding account: %w", err)
	}
	return st, nil
}

// FundingTotals are the Postgres terms of the conservation invariant (spec
// 7.2) for one asset, read in one snapshot. With spotTotal and
// spotExternal (net external credits into SPOT: adjustments) from the core:
//
//	Balance + spotTotal + InFlight == Deposits + spotExternal
//
// holds exactly whenever Uncertain == 0. A transfer in SOURCE_PENDING or
// TARGET_PENDING is uncertain: its adapter call may or may not have taken
// effect yet, so it is counted by state (TARGET_PENDING as in flight, per
// 7.2) and the equation may be off by its amount until it moves on.
type FundingTotals struct {
	Balance   Units // sum of balances_tb.available
	Deposits  Units // sum of funding_deposits.amount
	InFlight  Units // sum of amount in SOURCE_DONE, TARGET_PENDING, COMPENSATING
	Uncertain int   // transfers in SOURCE_PENDING or TARGET_PENDING
}

// Totals reads FundingTotals for asset.
func (f *Funding) Totals(ctx context.Context, asset AssetID) (FundingTotals, error) {
	var t FundingTotals
	err := pgx.BeginTxFunc(ctx, f.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT
				(SELECT COALESCE(sum(available), 0) FROM balances_tb WHERE asset_id = $1)::bigint,
				(SELECT COALESCE(sum(amount), 0) FROM funding_deposits WHERE asset_id = $1)::bigint,
				(SELECT COALESCE(sum(amount), 0) FROM transfers_tb WHERE asset_id = $1 AND state IN (20, 30, -20))::bigint,
				(SELECT count(*) FROM transfers_tb WHERE asset_id = $1 AND state IN (10, 30))::int`,
				int32(asset)).Scan(&t.Balance, &t.Deposits, &t.InFlight, &t.Uncertain)
		})
	if err != nil {
		return t, fmt.Errorf("transfer: totals: %w", err)
	}
	return t, nil
}
