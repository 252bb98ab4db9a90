package transfer

import (
	"errors"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// A fused step is a FUNDING operation and the CAS
// transitions around it, in ONE transaction of a batch: the state changes
// and the operation's effect (its transfer_operations record and balance
// change) commit together or not at all. This is stronger than
// persist-before-call, which it replaces for the Postgres side only: a
// state naming a FUNDING call can never be durable without the call's
// effect being decided in the same transaction, and vice versa.
//
// In a batch (batch_tx.go):
//
//	(A transfer Create makes without a cid skips INIT: fusePlan.direct.)
//
//	round trip 1  lock the transfer: SELECT ... FOR UPDATE WHERE req_id
//	              AND state = plan.at (the CAS's compare: when the row is
//	              elsewhere, or moves while we wait for its lock, the
//	              request is LOST and does nothing at all), or, with
//	              plan.insert, insert it in INIT (this transaction's own
//	              row: nobody else can see it, no lock needed); then the
//	              FUNDING reads of all the batch's fused steps
//	in memory     the operation is decided by decideOp in arrival order
//	              with the batch's other FUNDING operations (a repeat
//	              returns the recorded first outcome)
//	round trip 2  the records and balance changes, then the transitions:
//	              plan.pre, then plan.ok on SUCCESS or plan.fail on
//	              EXPLICIT_FAIL (nothing more on an unknown outcome, which
//	              is never recorded), written as ONE CAS UPDATE per request
//	              from plan.at to the chain's last state, all requests in
//	              one statement that returns the rows it moved; COMMIT
//
// Only the chain's end is written: its states in between would exist only
// inside this transaction, under its row lock, where no other transaction
// can see them, so writing each (it was 2-4 more non-HOT updates of the
// row per step) bought nothing but Postgres work: one UPDATE per step took
// `bench transfer --clients 64` (then mode fsm_fused) from 0.77x to 1.16x the naive
// ledger's TPS. The FSM still makes and counts every transition
// (plan.legal checks each against the table; Stats.CASWon counts them).
// The row lock taken in round trip 1 is held to COMMIT, so the UPDATE finds
// the row in plan.at; should it not (a bug), its statement fails on purpose
// and the whole batch rolls back with no effect.

// fusePlan is one fused step of one transfer.
type fusePlan struct {
	// insert, when set, is the transfer to insert in INIT first, in the
	// same transaction (its req_id is fresh; a taken (user, cid) inserts
	// nothing and the step is LOST)
	insert *Transfer
	at     State     // the state the transfer must be in (the compare)
	pre    []fuseCAS // transitions before the operation, whatever its outcome
	op     model.Op  // the FUNDING operation; "" = none (only pre)
	ok     []fuseCAS // transitions after a SUCCESS
	fail   []fuseCAS // transitions after an EXPLICIT_FAIL
}

// fuseCAS is one transition of a plan: to `to`, error_message msg (when
// not empty), followed by the operation's outcome when outcome is set.
type fuseCAS struct {
	to      State
	msg     string
	outcome bool
}

// legal reports whether every path of p is in the transition table.
func (p *fusePlan) legal() bool {
	path := func(s State, steps []fuseCAS) (State, bool) {
		for _, c := range steps {
			if !CanTransition(s, c.to) {
				return s, false
			}
			s = c.to
		}
		return s, true
	}
	s, good := path(p.at, p.pre)
	if !good {
		return false
	}
	_, okGood := path(s, p.ok)
	_, failGood := path(s, p.fail)
	return okGood && failGood
}

// chain is what p does once its operation's outcome is o.
func (p *fusePlan) chain(o model.Outcome) []fuseCAS {
	out := slices.Clip(p.pre)
	switch o.Kind {
	case model.Success:
		out = append(out, p.ok...)
	case model.ExplicitFail:
		out = append(out, p.fail...)
	}
	return out
}

// fusedLockSQL locks the transfers of the batch's fused steps that are in
// their plan's state, one primary-key probe each, in req_id order. A row
// being changed by another transaction is waited for and then re-checked
// (READ COMMITTED): a row that left the state is not returned.
const fusedLockSQL = `SELECT t.req_id FROM unnest($1::text[], $2::smallint[]) AS k(req_id, state)
	CROSS JOIN LATERAL (SELECT req_id FROM transfers_tb
		WHERE req_id = k.req_id AND state = k.state FOR UPDATE) AS t`

// fusedCASSQL is casSQL guarded: fewer rows moved than $5 fails the
// statement (and so the batch, with no effect). The moved rows come back
// as this transition left them.
const fusedCASSQL = `WITH moved AS (
	UPDATE transfers_tb AS t
	SET state = u.to_state, updated_at = now(), error_message = COALESCE(NULLIF(u.msg, ''), t.error_message)
	FROM unnest($1::text[], $2::smallint[], $3::smallint[], $4::text[]) AS u(req_id, from_state, to_state, msg)
	WHERE t.req_id = u.req_id AND t.state = u.from_state
	RETURNING ` + transferColsT + `
), n AS (SELECT count(*) AS moved FROM moved)
SELECT m.* FROM n LEFT JOIN moved AS m ON true
WHERE CASE WHEN n.moved = $5 THEN true
	ELSE ('` + fusedMark + `: ' || n.moved || ' of ' || $5 || ' moved')::boolean END`

// fusedMark identifies fusedCASSQL's guard error.
const fusedMark = "transfer batch: fused transition lost under lock"

// queueFusedLocks queues round trip 1's lock of the fused steps. Only the
// first fused step of a transfer in the batch is run; a later one (a
// racing driver) is answered LOST, as it would be after the first. A step
// that inserts its transfer locks nothing: the row is this transaction's
// own, and the insert reports it held (queueInserts), or, inserted
// directly in its chain's last state (fusePlan.direct), it holds it by
// construction. It reports whether the batch needs round trip 2 for its
// fused steps (every fused step does but a direct insert without an
// operation, which queueDirect may write in round trip 1).
func queueFusedLocks(b *pgx.Batch, reqs []*batchReq, ans []batchAnswer) (trip2 bool) {
	var idx []int
	first := map[string]bool{}
	for i, r := range reqs {
		if r.kind != kindFused || first[r.reqID] {
			continue
		}
		first[r.reqID] = true
		switch {
		case r.plan.direct():
			ans[i].won = true // inserted below, by this transaction: nobody else can see it, let alone move it
			trip2 = trip2 || r.plan.op != ""
		case r.plan.insert != nil:
			trip2 = trip2 || r.plan.op != "" || len(r.plan.pre) > 0 // else nothing to move: Store.Insert
		default:
			idx = append(idx, i)
			trip2 = true
		}
	}
	if len(idx) == 0 {
		return trip2
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(reqs[a].reqID, reqs[b].reqID) })
	ids, states := make([]string, len(idx)), make([]int16, len(idx))
	at := make(map[string]int, len(idx))
	for j, i := range idx {
		ids[j], states[j] = reqs[i].reqID, int16(reqs[i].plan.at)
		at[reqs[i].reqID] = i
	}
	b.Queue(fusedLockSQL, ids, states).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ans[at[id]].won = true
		}
		return rows.Err()
	})
	return true
}

// chainEnd is where p's chain leaves a transfer once its operation's
// outcome is o: the last state, the last error message the chain sets ("" =
// none) and how many transitions it made.
func (p *fusePlan) chainEnd(o model.Outcome) (s State, msg string, cas int) {
	s = p.at
	for _, c := range p.chain(o) {
		m := c.msg
		if c.outcome {
			m += o.String()
		}
		if m != "" {
			msg = m
		}
		s = c.to
		cas++
	}
	return s, msg, cas
}

// queueFusedCAS queues round trip 2's transitions of the fused steps that
// locked their transfer, after their operations were decided, and fills
// their answers' state and cas.
func queueFusedCAS(b *pgx.Batch, reqs []*batchReq, ans []batchAnswer) {
	type move struct {
		id       string
		from, to State
		msg      string
		req      int // index into reqs
	}
	var moves []move
	for i, r := range reqs {
		if r.kind != kindFused || !ans[i].won {
			continue
		}
		if r.plan.direct() {
			continue // not in the table yet: queueDirect inserts it where its chain ends
		}
		// The chain is legal (plan.legal) and runs under the row lock of
		// round trip 1, inside this one transaction: only its end is
		// written (from plan.at to the last state, with the last message
		// the chain leaves). cas still counts the transitions the FSM made.
		s, msg, cas := r.plan.chainEnd(ans[i].out)
		ans[i].cas = cas
		if s != r.plan.at {
			moves = append(moves, move{r.reqID, r.plan.at, s, msg, i})
		}
		ans[i].state = s
	}
	if len(moves) == 0 {
		return
	}
	slices.SortFunc(moves, func(a, b move) int { return strings.Compare(a.id, b.id) })
	n := len(moves)
	ids, from, to, msgs := make([]string, n), make([]int16, n), make([]int16, n), make([]string, n)
	at := make(map[string]int, n)
	for j, m := range moves {
		ids[j], from[j], to[j], msgs[j] = m.id, int16(m.from), int16(m.to), m.msg
		at[m.id] = m.req
	}
	b.Queue(fusedCASSQL, ids, from, to, msgs, int64(n)).Query(eachTransfer(at, func(i int, t Transfer) {
		ans[i].transfer = t
	}))
}

// direct reports whether p's transfer is inserted directly in the state its
// chain ends in, once its operation is decided (queueDirect), instead of
// in INIT and then moved by an UPDATE in the same transaction. The states
// before that one would exist only inside this transaction, where no other
// can see them, so the row is born where the FSM's chain leaves it: one
// heap tuple and one set of index entries instead of two. Only without a
// cid: a cid may be taken (UNIQUE (user_id, cid)), and whether it is must
// be known before the operation is decided, so such a transfer is still
// inserted in INIT in round trip 1 (queueInserts) and moved in round trip 2.
func (p *fusePlan) direct() bool { return p.insert != nil && p.insert.CID == "" }

// directSQL inserts transfers in the state their chain ended in (no cid:
// nothing to conflict with; a req_id is a fresh ULID). An error fails the
// batch with no effect, as any failed statement does.
const directSQL = `INSERT INTO transfers_tb
	(req_id, user_id, asset_id, amount, transfer_type, source_type, from_account, to_account, state, error_message)
	SELECT r.req_id, r.user_id, r.asset_id, r.amount, r.ttype, r.ttype, r.from_account, r.to_account, r.state, NULLIF(r.msg, '')
	FROM unnest($1::text[], $2::bigint[], $3::int[], $4::bigint[], $5::smallint[], $6::text[], $7::text[], $8::smallint[], $9::text[])
		AS r(req_id, user_id, asset_id, amount, ttype, from_account, to_account, state, msg)
	RETURNING ` + transferCols

// queueDirect queues the insert of the fused steps' transfers that are
// inserted directly (fusePlan.direct), all in one statement, after their
// operations were decided (in round trip 2; in round trip 1 when the batch
// has no operation to decide), and fills their answers as queueInserts and
// queueFusedCAS would have.
func queueDirect(b *pgx.Batch, reqs []*batchReq, ans []batchAnswer) {
	var c insertCols
	for i, r := range reqs {
		if r.kind != kindFused || !r.plan.direct() || !ans[i].won {
			continue
		}
		s, msg, cas := r.plan.chainEnd(ans[i].out)
		ans[i].state, ans[i].cas = s, cas
		c.add(i, *r.plan.insert, s, msg)
	}
	if len(c.ids) == 0 {
		return
	}
	got := 0
	read := eachTransfer(c.at, func(i int, t Transfer) {
		ans[i].transfer, ans[i].inserted = t, true
		got++
	})
	b.Queue(directSQL, c.ids, c.users, c.assets, c.amounts, c.types, c.froms, c.tos, c.states, c.msgs).Query(func(rows pgx.Rows) error {
		if err := read(rows); err != nil {
			return err
		}
		if got != len(c.ids) { // cannot happen: an INSERT without ON CONFLICT inserts every row or fails
			return errors.New("transfer batch: direct insert lost rows")
		}
		return nil
	})
}
