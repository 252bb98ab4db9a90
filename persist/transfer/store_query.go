package transfer

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// MaxListPageSize is the largest page List returns.
const MaxListPageSize = 100

// List returns one page of the user's transfers, newest first (created_at
// DESC, transfer_id DESC), and how many transfers the user has in all. page
// is 1-based; a page past the end is empty (total still set). page < 1 or
// size outside 1..MaxListPageSize is INVALID_REQUEST. The count and the page
// are read in one snapshot, so they agree.
func (s *Store) List(ctx context.Context, user UserID, page, size int) (ts []Transfer, total int64, err error) {
	if page < 1 || size < 1 || size > MaxListPageSize {
		return nil, 0, model.Reject(model.CodeInvalidRequest, fmt.Sprintf("page must be >= 1 and size 1..%d", MaxListPageSize))
	}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM transfers_tb WHERE user_id = $1`,
				int64(user)).Scan(&total); err != nil {
				return err
			}
			// Compare before multiplying: (page-1)*size cannot overflow
			// once it is known to be below total.
			if int64(page-1) >= (total+int64(size)-1)/int64(size) {
				return nil
			}
			rows, err := tx.Query(ctx, `SELECT `+transferCols+` FROM transfers_tb WHERE user_id = $1
				ORDER BY created_at DESC, transfer_id DESC LIMIT $2 OFFSET $3`,
				int64(user), size, int64(page-1)*int64(size))
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				t, err := scanTransfer(rows)
				if err != nil {
					return err
				}
				ts = append(ts, t)
			}
			return rows.Err()
		})
	if err != nil {
		return nil, 0, fmt.Errorf("transfer: list user %d: %w", user, err)
	}
	return ts, total, nil
}

// DailyUsage is the user's usage since `since` for the limits of 1.5.6,
// from idx_transfers_user (user_id, created_at):
//   - count: every transfer the user created at or after since, of any
//     asset and in any state. A refused-by-the-source (FAILED) attempt
//     counts: the per-day limit is on attempts, against abuse.
//   - amount: the sum of amount, in asset units, of the user's transfers of
//     asset created at or after since, except FAILED and ROLLED_BACK ones
//     (their funds never left, or came back). Transfers still moving count.
//     A sum beyond the int64 range is reported as MaxUnitsBalance.
//
// created_at is Postgres's clock; since is compared with it as is.
func (s *Store) DailyUsage(ctx context.Context, user UserID, asset AssetID, since time.Time) (count int, amount Units, err error) {
	err = s.pool.QueryRow(ctx, `SELECT count(*),
		LEAST(COALESCE(sum(amount) FILTER (WHERE asset_id = $2 AND state NOT IN (-10, -30)), 0),
			9223372036854775807)::bigint
		FROM transfers_tb WHERE user_id = $1 AND created_at >= $3`,
		int64(user), int32(asset), since).Scan(&count, &amount)
	if err != nil {
		return 0, 0, fmt.Errorf("transfer: daily usage of user %d: %w", user, err)
	}
	return count, amount, nil
}
