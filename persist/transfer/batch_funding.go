package transfer

import (
	"cmp"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// fundingBatch runs the FUNDING operations of one batch with the
// adapter's semantics (Funding), operation by operation in arrival order:
//
//   - its round trip 1 locks every balance row the batch touches (SELECT
//     ... FOR UPDATE, in (user, asset) order, so two batches never wait on
//     each other in a cycle) and only then reads the records: a concurrent
//     first call that held a lock has committed, and the read sees it;
//   - decide replays the operations in memory on those rows and records: a
//     repeat of (req_id, op) returns the first outcome (also when the first
//     is earlier in this batch), and every new decision is decideOp's, on
//     the balance left by the operations before it, so ops on one (user,
//     asset) apply in order;
//   - queueWrite inserts the new records, then changes each balance by
//     the sum of its SUCCESS records, in the pipeline that ends with
//     COMMIT: records and balance changes commit together or not at all.
//     If any record was already there (a concurrent first call outside
//     the batch, on a row nobody could lock), the record statement fails
//     on purpose, nothing behind it runs, and the batch runs again.
type fundingBatch struct {
	reqs   []*batchReq
	idx    []int                 // indexes of the funding requests in reqs, in arrival order
	rows   map[balKey]balanceRow // as decided so far; a deposit adds missing rows
	locked map[balKey]bool       // rows that existed and were locked in round trip 1
	recs   map[recKey]opRecord
	users  map[UserID]bool // users with some FUNDING row (an account)
	fresh  []recKey        // records decided in this batch, in decision order
}

type balKey struct {
	user  UserID
	asset AssetID
}

type recKey struct {
	reqID string
	op    model.Op
}

// opRecord is a transfer_operations row: the first outcome of (req_id, op).
type opRecord struct {
	out    model.Outcome // SUCCESS or EXPLICIT_FAIL(code)
	user   UserID
	asset  AssetID
	amount Units
}

// outcomeFor is readOp's answer for a call with these parameters.
func (r opRecord) outcomeFor(user UserID, asset AssetID, amount Units) model.Outcome {
	if r.user != user || r.asset != asset || r.amount != amount {
		return model.UnknownOutcome(string(model.CodeReqIDConflict))
	}
	return r.out
}

func newFundingBatch(reqs []*batchReq) *fundingBatch {
	fb := &fundingBatch{reqs: reqs}
	for i, r := range reqs {
		if r.kind == kindFused && r.op != "" {
			fb.idx = append(fb.idx, i)
		}
	}
	return fb
}

// lockSQL locks the batch's balance rows one primary-key probe at a time,
// in the order of its arrays (sorted by the caller): every batch takes its
// row locks in (user, asset) order. A missing row locks nothing.
const lockSQL = `SELECT b.* FROM unnest($1::bigint[], $2::int[]) AS k(user_id, asset_id)
	CROSS JOIN LATERAL (SELECT user_id, asset_id, available, status FROM balances_tb
		WHERE user_id = k.user_id AND asset_id = k.asset_id FOR UPDATE) AS b`

const recordsSQL = `SELECT o.* FROM unnest($1::text[], $2::text[]) AS k(req_id, op)
	CROSS JOIN LATERAL (SELECT req_id, op, result, COALESCE(code, ''), user_id, asset_id, amount
		FROM transfer_operations WHERE req_id = k.req_id AND adapter = 'funding' AND op = k.op LIMIT 1) AS o`

// usersSQL returns those of $1 with some FUNDING row (an account).
const usersSQL = `SELECT k.user_id FROM unnest($1::bigint[]) AS k(user_id)
	CROSS JOIN LATERAL (SELECT 1 FROM balances_tb WHERE user_id = k.user_id LIMIT 1) AS b`

// queueReads queues round trip 1's funding statements, in this order: the
// lock, then the reads (each statement takes its snapshot when it starts,
// after the locks are held).
func (fb *fundingBatch) queueReads(b *pgx.Batch) {
	if len(fb.idx) == 0 {
		return
	}
	fb.rows, fb.locked, fb.recs, fb.users = map[balKey]balanceRow{}, map[balKey]bool{}, map[recKey]opRecord{}, map[UserID]bool{}
	var keys []balKey
	var recIDs, recOps []string
	var depositors []int64
	seenKey, seenRec, seenUser := map[balKey]bool{}, map[recKey]bool{}, map[UserID]bool{}
	addRec := func(k recKey) {
		if !seenRec[k] {
			seenRec[k] = true
			recIDs, recOps = append(recIDs, k.reqID), append(recOps, string(k.op))
		}
	}
	for _, i := range fb.idx {
		r := fb.reqs[i]
		if k := (balKey{r.user, r.asset}); !seenKey[k] {
			seenKey[k] = true
			keys = append(keys, k)
		}
		addRec(recKey{r.reqID, r.op})
		switch r.op {
		case model.OpRefund:
			addRec(recKey{r.reqID, model.OpWithdraw})
		case model.OpDeposit:
			if !seenUser[r.user] {
				seenUser[r.user] = true
				depositors = append(depositors, int64(r.user))
			}
		}
	}
	slices.SortFunc(keys, func(a, b balKey) int {
		return cmp.Or(cmp.Compare(a.user, b.user), cmp.Compare(a.asset, b.asset))
	})
	users, assets := make([]int64, len(keys)), make([]int32, len(keys))
	for j, k := range keys {
		users[j], assets[j] = int64(k.user), int32(k.asset)
	}
	b.Queue(lockSQL, users, assets).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var u int64
			var a int32
			var row balanceRow
			var status string
			if err := rows.Scan(&u, &a, &row.available, &status); err != nil {
				return err
			}
			row.status = model.AccountStatus(status)
			fb.rows[balKey{UserID(u), AssetID(a)}] = row
			fb.locked[balKey{UserID(u), AssetID(a)}] = true
			fb.users[UserID(u)] = true
		}
		return rows.Err()
	})
	b.Queue(recordsSQL, recIDs, recOps).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id, op, result, code string
			var u int64
			var a int32
			var rec opRecord
			if err := rows.Scan(&id, &op, &result, &code, &u, &a, &rec.amount); err != nil {
				return err
			}
			rec.user, rec.asset, rec.out = UserID(u), AssetID(a), model.OK()
			if result != "SUCCESS" {
				rec.out = model.Outcome{Kind: model.ExplicitFail, Code: code}
			}
			fb.recs[recKey{id, model.Op(op)}] = rec
		}
		return rows.Err()
	})
	if len(depositors) > 0 {
		b.Queue(usersSQL, depositors).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var u int64
				if err := rows.Scan(&u); err != nil {
					return err
				}
				fb.users[UserID(u)] = true
			}
			return rows.Err()
		})
	}
}

// decide answers every funding request in arrival order (see fundingBatch),
// each with the fault faults (nil: none) injects into it, if any (drawn on
// the request's first run, kept for the runs again after a rollback); it
// returns the faults to act on when the batch commits (fault.go).
func (fb *fundingBatch) decide(ans []batchAnswer, faults FaultSource) []model.Fault {
	var drawn []model.Fault
	for _, i := range fb.idx {
		r := fb.reqs[i]
		if r.kind == kindFused && !ans[i].won {
			continue // the transfer was not in plan.at: the operation is not this request's to make
		}
		if faults != nil {
			if !r.drawn {
				r.fault, r.drawn = faults.Draw(r.op, r.reqID), true
			}
			if drawn == nil {
				drawn = make([]model.Fault, len(ans))
			}
			drawn[i] = r.fault
		}
		ans[i].out = fb.decideOne(r, r.fault)
	}
	return drawn
}

// decideOne decides r, with the injected fault f: an explicit failure
// refuses a first call (recorded, as any refusal); a fault before the
// effect answers its outcome and decides nothing.
func (fb *fundingBatch) decideOne(r *batchReq, f model.Fault) model.Outcome {
	if o := model.CheckParams(r.reqID, r.user, r.asset, r.amount); o != nil {
		return *o // the adapter trusts no caller: refused the same way every time, not recorded
	}
	if o, before := beforeEffect(f); before {
		return o
	}
	key := recKey{r.reqID, r.op}
	if rec, seen := fb.recs[key]; seen { // a repeat: the first outcome, no effect
		return rec.outcomeFor(r.user, r.asset, r.amount)
	}
	if f == model.FaultExplicitFail {
		out := model.Fail(model.CodeInjected)
		if r.op == model.OpRefund {
			return out // a refund cannot be refused: not recorded, retried (Faulty keeps it refused in memory)
		}
		fb.recs[key] = opRecord{out: out, user: r.user, asset: r.asset, amount: r.amount}
		fb.fresh = append(fb.fresh, key)
		return out
	}
	bk := balKey{r.user, r.asset}
	row, found := fb.rows[bk]
	if !found {
		row = balanceRow{status: model.Active} // as lockBalance reports a missing row
	}
	k := opFacts{row: row, found: found, userExists: fb.users[r.user]}
	if r.op == model.OpRefund {
		if w, seen := fb.recs[recKey{r.reqID, model.OpWithdraw}]; seen {
			k.withdraw, k.withdrawSeen = w.outcomeFor(r.user, r.asset, r.amount), true
		}
	}
	out, delta := decideOp(r.op, r.amount, k)
	if out.Kind == model.Unknown {
		return out // nothing decided: no record, no effect
	}
	if out.Kind == model.Success {
		row.available += delta
		fb.rows[bk] = row // a deposit into a missing row creates it
	}
	fb.recs[key] = opRecord{out: out, user: r.user, asset: r.asset, amount: r.amount}
	fb.fresh = append(fb.fresh, key)
	return out
}
