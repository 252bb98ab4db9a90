package transfer

import (
	"context"
	"errors"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// The Batcher's reader: Funding.AccountState (Create's
// pre-check of the FUNDING side, spec 1.5.4-1.5.5) is a read of committed
// rows, locking nothing, so it need not wait for a writer's transaction.
// A reader goroutine of its own takes every AccountState queued (up to
// MaxBatch) and answers them all from ONE statement on a pooled connection
// (one snapshot), the way the writers share round trips: one statement per
// batch instead of one round trip per call, on one backend instead of one
// per caller. Each answer is the one a statement of its own would give
// on the same committed rows.

// accountReq is one AccountState call.
type accountReq struct {
	ctx   context.Context
	user  UserID
	asset AssetID
	done  chan accountAnswer // capacity 1
}

type accountAnswer struct {
	st  model.AccountState
	err error
}

// accountsSQL reads many (user, asset) at once, in the order
// of its arrays: the row if it exists (one primary-key probe), else whether
// the user has any FUNDING row (an account).
const accountsSQL = `SELECT b.available, b.status,
		CASE WHEN b.status IS NULL THEN EXISTS (SELECT 1 FROM balances_tb AS x WHERE x.user_id = k.user_id) ELSE true END
	FROM unnest($1::bigint[], $2::int[]) WITH ORDINALITY AS k(user_id, asset_id, i)
	LEFT JOIN LATERAL (SELECT available, status FROM balances_tb
		WHERE user_id = k.user_id AND asset_id = k.asset_id LIMIT 1) AS b ON true
	ORDER BY k.i`

// account queues one AccountState and waits for its answer or ctx's end.
func (b *Batcher) account(ctx context.Context, user UserID, asset AssetID) (model.AccountState, error) {
	r := &accountReq{ctx: ctx, user: user, asset: asset, done: make(chan accountAnswer, 1)}
	if err := push(b, b.reads, r); err != nil {
		return model.AccountState{}, err
	}
	select {
	case a := <-r.done:
		return a.st, a.err
	case <-ctx.Done():
		return model.AccountState{}, ctx.Err()
	}
}

// read is the reader: as write, for AccountState calls.
func (b *Batcher) read() {
	defer b.wg.Done()
	drain(b.reads, b.opt.MaxBatch, b.readBatch)
}

// readBatch answers every request of batch exactly once.
func (b *Batcher) readBatch(batch []*accountReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- accountAnswer{err: err}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	users, assets := make([]int64, len(live)), make([]int32, len(live))
	for i, r := range live {
		users[i], assets[i] = int64(r.user), int32(r.asset)
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.opt.Timeout)
	defer cancel()
	ans := make([]accountAnswer, len(live))
	err := b.queryAccounts(ctx, users, assets, ans)
	if err == nil {
		b.stats.Reads.Add(1)
	}
	for i, r := range live {
		if err != nil {
			ans[i] = accountAnswer{err: err}
		}
		r.done <- ans[i]
	}
}

func (b *Batcher) queryAccounts(ctx context.Context, users []int64, assets []int32, ans []accountAnswer) error {
	rows, err := b.pool.Query(ctx, accountsSQL, users, assets)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var available *int64
		var status *string
		var exists bool
		if err := rows.Scan(&available, &status, &exists); err != nil {
			return err
		}
		if n == len(ans) {
			return errors.New("transfer: account read returned too many rows")
		}
		st := model.AccountState{Exists: exists, Status: model.Active}
		if status != nil && available != nil { // the row
			st.Available, st.Status = Units(*available), model.AccountStatus(*status)
		}
		ans[n].st = st
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != len(ans) {
		return errors.New("transfer: account read returned too few rows")
	}
	return nil
}
