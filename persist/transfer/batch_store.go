package transfer

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/ulid"
)

// The Store's requests in round trip 1, in this order:
//
//	reads    Get: one SELECT for all; it runs before any write of the
//	         batch, so it sees committed rows only, as a Get alone would
//	inserts  fused steps that insert (Store.Insert is one): one multi-row INSERT ... ON CONFLICT (user_id, cid) WHERE cid IS NOT NULL DO NOTHING
//	CAS      Transition: one multi-row compare-and-set per round (below)
//	notes    NoteRetry: likewise
//
// Plans. Reads over an array of keys are written as one primary-key probe
// per key (unnest ... CROSS JOIN LATERAL (... LIMIT 1)), which no table
// size or stale statistic can turn into a scan of the whole table. The
// multi-row UPDATEs are left to the planner: on a table of production size
// with statistics it probes the primary key too (a just-created table
// whose statistics say "tiny" while it grows is scanned instead, by the
// statements of a single request as well, until autoanalyze passes).

// queueStore queues the Store's statements of reqs.
func queueStore(b *pgx.Batch, reqs []*batchReq, ans []batchAnswer) {
	queueGets(b, reqs, ans)
	queueInserts(b, reqs, ans)
	queueCAS(b, reqs, ans)
	queueNotes(b, reqs)
}

const getSQL = `SELECT t.* FROM unnest($1::text[]) AS k(req_id)
	CROSS JOIN LATERAL (SELECT ` + transferCols + ` FROM transfers_tb WHERE req_id = k.req_id LIMIT 1) AS t`

func queueGets(b *pgx.Batch, reqs []*batchReq, ans []batchAnswer) {
	want := map[string][]int{} // req_id -> indexes of its Get requests
	var ids []string
	for i, r := range reqs {
		if r.kind == kindGet {
			if want[r.reqID] == nil {
				ids = append(ids, r.reqID)
			}
			want[r.reqID] = append(want[r.reqID], i)
		}
	}
	if len(ids) == 0 {
		return
	}
	b.Queue(getSQL, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			t, err := scanTransfer(rows)
			if err != nil {
				return err
			}
			for _, i := range want[t.ReqID] {
				ans[i].transfer = t
			}
			delete(want, t.ReqID)
		}
		for _, is := range want { // not found
			for _, i := range is {
				ans[i].err = ErrNotFound
			}
		}
		return rows.Err()
	})
}

const insertSQL = `INSERT INTO transfers_tb
	(req_id, cid, user_id, asset_id, amount, transfer_type, source_type, from_account, to_account, state)
	SELECT r.req_id, NULLIF(r.cid, ''), r.user_id, r.asset_id, r.amount, r.ttype, r.ttype, r.from_account, r.to_account, 0
	FROM unnest($1::text[], $2::text[], $3::bigint[], $4::int[], $5::bigint[], $6::smallint[], $7::text[], $8::text[])
		AS r(req_id, cid, user_id, asset_id, amount, ttype, from_account, to_account)
	ON CONFLICT (user_id, cid) WHERE cid IS NOT NULL DO NOTHING
	RETURNING ` + transferCols

// batchInsertable reports whether t meets every constraint of transfers_tb
// but the (user_id, cid) uniqueness, so its INSERT cannot fail the batch
// (a req_id is a fresh ULID: never taken). Anything else is inserted alone,
// where the database refuses it as it always did.
func batchInsertable(t Transfer) bool {
	known := func(a model.AccountType) bool { return a == model.AccountFunding || a == model.AccountSpot }
	return t.State == Init && t.UserID > 0 && t.UserID <= 1<<63-1 && t.Asset > 0 && t.Asset <= 1<<31-1 &&
		t.Amount > 0 && known(t.From) && known(t.To) && t.From != t.To && ulid.Valid(t.ReqID) &&
		utf8.ValidString(t.CID) && utf8.RuneCountInString(t.CID) <= 64 && !strings.ContainsRune(t.CID, 0)
}

func queueInserts(b *pgx.Batch, reqs []*batchReq, ans []batchAnswer) {
	var c insertCols
	for i, r := range reqs {
		if r.kind == kindFused && r.plan.insert != nil && !r.plan.direct() {
			c.add(i, *r.plan.insert, Init, "") // batchInsertable: checked by the caller
		}
	}
	if len(c.ids) == 0 {
		return
	}
	// The rest meet a transfer with the same (user, cid): inserted = false.
	b.Queue(insertSQL, c.ids, c.cids, c.users, c.assets, c.amounts, c.types, c.froms, c.tos).Query(
		eachTransfer(c.at, func(i int, t Transfer) {
			// The step's own row: no other transaction can see it, let
			// alone move it, before this one commits. It is in INIT and
			// this request holds it, as queueFusedLocks would report.
			ans[i].transfer, ans[i].inserted, ans[i].won = t, true, true
		}))
}

// insertCols are the columns of the transfers one statement inserts, and
// the request each comes from (at: req_id -> index into the batch).
type insertCols struct {
	ids, cids, froms, tos, msgs []string
	users, amounts              []int64
	assets                      []int32
	types, states               []int16
	at                          map[string]int
}

func (c *insertCols) add(req int, t Transfer, s State, msg string) {
	if c.at == nil {
		c.at = map[string]int{}
	}
	c.at[t.ReqID] = req
	c.ids, c.cids, c.froms, c.tos = append(c.ids, t.ReqID), append(c.cids, t.CID), append(c.froms, string(t.From)), append(c.tos, string(t.To))
	c.users, c.amounts, c.assets = append(c.users, int64(t.UserID)), append(c.amounts, int64(t.Amount)), append(c.assets, int32(t.Asset))
	c.types, c.states, c.msgs = append(c.types, transferType(t.From)), append(c.states, int16(s)), append(c.msgs, msg)
}

// eachTransfer reads the transfer rows a statement returns, handing each
// to f with the index of the request at maps its req_id to.
func eachTransfer(at map[string]int, f func(i int, t Transfer)) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		for rows.Next() {
			t, err := scanTransfer(rows)
			if err != nil {
				return err
			}
			f(at[t.ReqID], t)
		}
		return rows.Err()
	}
}

// casSQL is transitionSQL for many transfers at once; won = the row was in
// `from` when this statement reached it, and it comes back as it was left.
const casSQL = `UPDATE transfers_tb AS t
	SET state = u.to_state, updated_at = now(), error_message = COALESCE(NULLIF(u.msg, ''), t.error_message)
	FROM unnest($1::text[], $2::smallint[], $3::smallint[], $4::text[]) AS u(req_id, from_state, to_state, msg)
	WHERE t.req_id = u.req_id AND t.state = u.from_state
	RETURNING ` + transferColsT

// noteSQL is noteRetrySQL for many transfers at once.
const noteSQL = `UPDATE transfers_tb AS t
	SET retry_count = t.retry_count + 1, error_message = u.msg, updated_at = now()
	FROM unnest($1::text[], $2::smallint[], $3::text[]) AS u(req_id, at_state, msg)
	WHERE t.req_id = u.req_id AND t.state = u.at_state`

// Rounds. A multi-row UPDATE changes a row at most once, so the k-th CAS
// (or note) of one transfer in this batch (racing drivers) goes into the
// k-th statement: each sees the effect of those before it, as it would
// alone. The transfers of round k are a subset of round k-1's, so every
// row lock of the CAS statements is taken in round 0, whose rows are
// sorted by req_id.

func queueCAS(b *pgx.Batch, reqs []*batchReq, ans []batchAnswer) {
	for _, round := range rounds(reqs, kindCAS) {
		n := len(round)
		ids, from, to, msgs := make([]string, n), make([]int16, n), make([]int16, n), make([]string, n)
		at := make(map[string]int, n) // req_id -> index into reqs
		for j, i := range round {
			r := reqs[i]
			ids[j], from[j], to[j], msgs[j] = r.reqID, int16(r.from), int16(r.to), r.msg
			at[r.reqID] = i
		}
		b.Queue(casSQL, ids, from, to, msgs).Query(eachTransfer(at, func(i int, t Transfer) {
			ans[i].won, ans[i].transfer = true, t
		}))
	}
}

func queueNotes(b *pgx.Batch, reqs []*batchReq) {
	for _, round := range rounds(reqs, kindNote) {
		n := len(round)
		ids, states, msgs := make([]string, n), make([]int16, n), make([]string, n)
		for j, i := range round {
			ids[j], states[j], msgs[j] = reqs[i].reqID, int16(reqs[i].from), reqs[i].msg
		}
		b.Queue(noteSQL, ids, states, msgs)
	}
}

// rounds returns the indexes of the requests of kind, split so that no
// req_id appears twice in a round (the k-th request of a transfer is in
// round k), each round sorted by req_id.
func rounds(reqs []*batchReq, kind reqKind) [][]int {
	var out [][]int
	seen := map[string]int{}
	for i, r := range reqs {
		if r.kind != kind {
			continue
		}
		k := seen[r.reqID]
		seen[r.reqID] = k + 1
		if k == len(out) {
			out = append(out, nil)
		}
		out[k] = append(out[k], i)
	}
	for _, round := range out {
		slices.SortFunc(round, func(a, b int) int { return strings.Compare(reqs[a].reqID, reqs[b].reqID) })
	}
	return out
}
