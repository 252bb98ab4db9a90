package invariant

import (
	"context"
	"github.com/ubscore/ubscore/persist/transfer"
	"math/big"

	"github.com/jackc/pgx/v5"
)

// The withdrawals term of the conservation check. An on-chain withdrawal
// (persist/withdraw, migration 0031) debits FUNDING in the same Postgres
// transaction that inserts it PENDING; it becomes COMPLETED when its managed
// tx is CONFIRMED, or CANCELLED with the refund to FUNDING in the same
// transaction as that state change. So in any one snapshot the money that
// left FUNDING for the chain and did not come back is exactly
//
//	withdrawn = Σ withdrawals.amount WHERE state IN (PENDING, COMPLETED)
//
// read in the snapshot P beside balances_tb: the equation stays exact to the
// unit while withdrawals are in flight.
func sumWithdrawn(ctx context.Context, tx pgx.Tx) (map[transfer.AssetID]*big.Int, error) {
	return sumByAsset(ctx, tx, `SELECT asset_id, sum(amount)::text FROM withdrawals
		WHERE state IN ('PENDING', 'COMPLETED') GROUP BY asset_id`)
}
