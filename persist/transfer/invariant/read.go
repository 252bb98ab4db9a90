package invariant

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// The two Postgres reads of CheckInvariant (see invariant.go for why they
// are exact).

// underTransfersLock holds a SHARE lock on transfers_tb (no insert, no
// state change can commit) while it reads the non-terminal transfers and the
// highest transfer_id, then runs during(asked) (the core read) before
// releasing it. Nothing is written: the transaction is rolled back.
func underTransfersLock(ctx context.Context, pool *pgxpool.Pool, during func(asked []string) error) (asked []string, mark int64, err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("transfer: invariant: begin: %w", err)
	}
	defer func() {
		// Release the lock even when ctx is done.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, InvariantLockTimeout.Milliseconds())); err != nil {
		return nil, 0, fmt.Errorf("transfer: invariant: %w", err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE transfers_tb IN SHARE MODE`); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
			return nil, 0, fmt.Errorf("%w: %v", ErrTransfersBusy, err)
		}
		return nil, 0, fmt.Errorf("transfer: invariant: lock transfers_tb: %w", err)
	}
	if err := tx.QueryRow(ctx, `SELECT COALESCE(max(transfer_id), 0) FROM transfers_tb`).Scan(&mark); err != nil {
		return nil, 0, fmt.Errorf("transfer: invariant: watermark: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT req_id FROM transfers_tb WHERE state NOT IN (40, -10, -30) LIMIT $1`,
		MaxInvariantCandidates+1)
	if err != nil {
		return nil, 0, fmt.Errorf("transfer: invariant: moving transfers: %w", err)
	}
	asked, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, 0, fmt.Errorf("transfer: invariant: moving transfers: %w", err)
	}
	if len(asked) > MaxInvariantCandidates {
		return nil, 0, ErrTooManyMoving
	}
	if err := during(asked); err != nil {
		return nil, 0, err
	}
	return asked, mark, nil
}

// fundingSide is the Postgres snapshot P: the FUNDING terms and the moving
// transfers with their FUNDING operations.
type fundingSide struct {
	at          time.Time
	funding     map[transfer.AssetID]*big.Int
	deposits    map[transfer.AssetID]*big.Int
	inFlightFSM map[transfer.AssetID]*big.Int
	withdrawn   map[transfer.AssetID]*big.Int // invariant_withdrawals.go
	moving      []movingTransfer
}

// readFundingSide reads P in one REPEATABLE READ snapshot, after the core
// read. Moving: asked under the lock, created after it (transfer_id >
// mark), or non-terminal now (which, if neither, is an anomaly).
func readFundingSide(ctx context.Context, pool *pgxpool.Pool, asked []string, mark int64) (fundingSide, error) {
	p := fundingSide{}
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&p.at); err != nil {
				return err
			}
			var err error
			if p.funding, err = sumByAsset(ctx, tx, `SELECT asset_id, sum(available)::text FROM balances_tb GROUP BY asset_id`); err != nil {
				return err
			}
			if p.deposits, err = sumByAsset(ctx, tx, `SELECT asset_id, sum(amount)::text FROM funding_deposits GROUP BY asset_id`); err != nil {
				return err
			}
			if p.inFlightFSM, err = sumByAsset(ctx, tx, `SELECT asset_id, sum(amount)::text FROM transfers_tb
				WHERE state IN (20, 30, -20) GROUP BY asset_id`); err != nil {
				return err
			}
			if p.withdrawn, err = sumWithdrawn(ctx, tx); err != nil {
				return err
			}
			p.moving, err = readMoving(ctx, tx, asked, mark)
			return err
		})
	if err != nil {
		return p, fmt.Errorf("transfer: invariant: funding snapshot: %w", err)
	}
	return p, nil
}

func sumByAsset(ctx context.Context, tx pgx.Tx, sql string) (map[transfer.AssetID]*big.Int, error) {
	rows, err := tx.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[transfer.AssetID]*big.Int{}
	for rows.Next() {
		var a int32
		var s string
		if err := rows.Scan(&a, &s); err != nil {
			return nil, err
		}
		v, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("sum %q is not an integer", s)
		}
		out[transfer.AssetID(a)] = v
	}
	return out, rows.Err()
}

// readMoving reads the moving transfers and their FUNDING operations. An
// operation counts only when its record matches the transfer (a record with
// other parameters moved a balance this transfer does not account for: the
// difference shows in the sums).
func readMoving(ctx context.Context, tx pgx.Tx, asked []string, mark int64) ([]movingTransfer, error) {
	rows, err := tx.Query(ctx, `SELECT t.req_id, t.transfer_id, t.asset_id, t.amount, t.from_account, t.to_account, t.state,
			COALESCE(bool_or(o.op = 'withdraw'), false), COALESCE(bool_or(o.op = 'deposit'), false),
			COALESCE(bool_or(o.op = 'refund'), false)
		FROM transfers_tb t
		LEFT JOIN transfer_operations o ON o.req_id = t.req_id AND o.adapter = 'funding' AND o.result = 'SUCCESS'
			AND o.user_id = t.user_id AND o.asset_id = t.asset_id AND o.amount = t.amount
		WHERE t.req_id = ANY($1::text[]) OR t.transfer_id > $2 OR t.state NOT IN (40, -10, -30)
		GROUP BY t.req_id
		LIMIT $3`, asked, mark, 2*MaxInvariantCandidates+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []movingTransfer
	for rows.Next() {
		var m movingTransfer
		var asset int32
		var from, to string
		if err := rows.Scan(&m.reqID, &m.transferID, &asset, &m.amount, &from, &to, &m.state,
			&m.funding.Withdrawn, &m.funding.Deposited, &m.funding.Refunded); err != nil {
			return nil, err
		}
		m.asset, m.from, m.to = transfer.AssetID(asset), model.AccountType(from), model.AccountType(to)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) > 2*MaxInvariantCandidates {
		return nil, ErrTooManyMoving
	}
	return out, nil
}
