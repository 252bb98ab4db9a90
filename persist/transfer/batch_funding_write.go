package transfer

import (
	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// Round trip 2 of a batch with FUNDING operations (see fundingBatch): the
// records this batch decided, then the balance changes they imply, then
// COMMIT (queued by exec), in one pipeline.

// recordSQL inserts the batch's new records ($1..$7, one element each).
// Its last SELECT is the guard: when fewer than $8 went in (a concurrent
// first call outside the batch inserted one first), it fails with a message
// holding racedMark (a failed cast is the one way to raise an error from
// plain SQL), the rest of the pipeline, COMMIT included, is skipped, and
// the batch runs again (see retryable).
const recordSQL = `WITH rec AS (
	INSERT INTO transfer_operations (req_id, adapter, op, result, code, user_id, asset_id, amount)
	SELECT r.req_id, 'funding', r.op, r.result, NULLIF(r.code, ''), r.user_id, r.asset_id, r.amount
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::int[], $7::bigint[])
		AS r(req_id, op, result, code, user_id, asset_id, amount)
	ON CONFLICT (req_id, adapter, op) DO NOTHING
	RETURNING 1
)
SELECT CASE WHEN count(*) = $8 THEN count(*)
	ELSE ('` + racedMark + `: ' || count(*) || ' of ' || $8 || ' inserted')::bigint END
FROM rec`

// racedMark identifies recordSQL's guard error (see retryable).
const racedMark = "transfer batch: operation record raced"

// changeSQL applies the net change of rows locked in round trip 1 (one
// element per row), version +1 per successful operation (as changeBalance
// does once per operation). Each row is found by one primary-key probe
// (the LIMIT keeps the planner from turning the probes into a join over
// the whole table, as it did on a small table: a sequential scan and a
// hash per batch) and updated by its tid: the row is locked by this
// transaction since round trip 1 and not changed since, so the tid is its
// current version. The guard: fewer rows changed than $5 fails the
// statement (and so the batch, with no effect), never a lost change.
const changeSQL = `WITH changed AS (
	UPDATE balances_tb AS b
	SET available = b.available + s.delta, version = b.version + s.ops, updated_at = now()
	FROM (SELECT x.tid, c.delta, c.ops
		FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::bigint[]) AS c(user_id, asset_id, delta, ops)
		CROSS JOIN LATERAL (SELECT ctid AS tid FROM balances_tb
			WHERE user_id = c.user_id AND asset_id = c.asset_id LIMIT 1) AS x) AS s
	WHERE b.ctid = s.tid
	RETURNING 1
)
SELECT CASE WHEN count(*) = $5 THEN count(*)
	ELSE ('` + changedMark + `: ' || count(*) || ' of ' || $5 || ' changed')::bigint END
FROM changed`

// changedMark identifies changeSQL's guard error.
const changedMark = "transfer batch: locked balance row not changed"

// createSQL creates the rows that did not exist when the batch locked (a
// deposit into a FUNDING account without that asset's row): version starts
// at 0 like a row made by changeBalance, +1 per further operation. Should
// a concurrent deposit have created one meanwhile, the change is added to
// it (for such a row the net change is a credit, never below zero).
const createSQL = `INSERT INTO balances_tb AS b (user_id, asset_id, available, version)
	SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::bigint[])
	ON CONFLICT (user_id, asset_id) DO UPDATE
	SET available = b.available + EXCLUDED.available, version = b.version + EXCLUDED.version + 1, updated_at = now()`

// queueWrite queues round trip 2's writes, if this batch decided any
// record: the records (guarded), then every changed balance, each
// row's change the sum of the SUCCESS records just inserted for it.
func (fb *fundingBatch) queueWrite(b *pgx.Batch) {
	n := len(fb.fresh)
	if n == 0 {
		return
	}
	ids, ops, results, codes := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	users, assets, amounts := make([]int64, n), make([]int32, n), make([]int64, n)
	type change struct {
		delta Units
		ops   int64 // successful operations
	}
	changes := map[balKey]*change{}
	var order []balKey // first change first
	for j, k := range fb.fresh {
		rec := fb.recs[k]
		ids[j], ops[j], results[j] = k.reqID, string(k.op), "SUCCESS"
		users[j], assets[j], amounts[j] = int64(rec.user), int32(rec.asset), int64(rec.amount)
		if rec.out.Kind == model.ExplicitFail {
			results[j], codes[j] = "EXPLICIT_FAIL", rec.out.Code
			continue
		}
		bk := balKey{rec.user, rec.asset}
		c := changes[bk]
		if c == nil {
			c = &change{}
			changes[bk] = c
			order = append(order, bk)
		}
		c.ops++
		if k.op == model.OpWithdraw {
			c.delta -= rec.amount
		} else {
			c.delta += rec.amount
		}
	}
	b.Queue(recordSQL, ids, ops, results, codes, users, assets, amounts, int64(n))
	// Rows locked in round trip 1 are updated; the others are created.
	var lockedUsers, lockedDeltas, lockedOps, newUsers, newDeltas, newVersions []int64
	var lockedAssets, newAssets []int32
	for _, bk := range order {
		c := changes[bk]
		if fb.locked[bk] {
			lockedUsers, lockedAssets = append(lockedUsers, int64(bk.user)), append(lockedAssets, int32(bk.asset))
			lockedDeltas, lockedOps = append(lockedDeltas, int64(c.delta)), append(lockedOps, c.ops)
			continue
		}
		newUsers, newAssets = append(newUsers, int64(bk.user)), append(newAssets, int32(bk.asset))
		newDeltas, newVersions = append(newDeltas, int64(c.delta)), append(newVersions, c.ops-1)
	}
	if len(lockedUsers) > 0 {
		b.Queue(changeSQL, lockedUsers, lockedAssets, lockedDeltas, lockedOps, int64(len(lockedUsers)))
	}
	if len(newUsers) > 0 {
		b.Queue(createSQL, newUsers, newAssets, newDeltas, newVersions)
	}
}
