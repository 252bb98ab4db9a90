package transfer

import (
	"context"
	"fmt"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// Balances returns the user's FUNDING rows by asset (no locks: display only).
func (f *Funding) Balances(ctx context.Context, user UserID) (map[AssetID]model.AccountState, error) {
	rows, err := f.pool.Query(ctx, `SELECT asset_id, available, status FROM balances_tb WHERE user_id = $1`, int64(user))
	if err != nil {
		return nil, fmt.Errorf("transfer: funding balances: %w", err)
	}
	defer rows.Close()
	out := map[AssetID]model.AccountState{}
	for rows.Next() {
		var a int32
		var st model.AccountState
		var status string
		if err := rows.Scan(&a, &st.Available, &status); err != nil {
			return nil, fmt.Errorf("transfer: funding balances: %w", err)
		}
		st.Exists, st.Status = true, model.AccountStatus(status)
		out[AssetID(a)] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("transfer: funding balances: %w", err)
	}
	return out, nil
}

// SetStatusAll sets the status of every FUNDING row of the user (ErrNotFound
// if the user has no FUNDING account).
func (f *Funding) SetStatusAll(ctx context.Context, user UserID, st model.AccountStatus) error {
	tag, err := f.pool.Exec(ctx, `UPDATE balances_tb SET status = $2, version = version + 1, updated_at = now()
		WHERE user_id = $1`, int64(user), string(st))
	if err != nil {
		return fmt.Errorf("transfer: set status: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
