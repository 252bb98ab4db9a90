package transfer

import (
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// A fused step (opt in: Config.Fuse) is a FUNDING operation and the CAS
// transitions around it, in ONE transaction of a batch: the state changes
// and the operation's effect (its transfer_operations record and balance
// change) commit together or not at all. This is stronger than
// persist-before-call, which it replaces for the Postgres side only: a
// state naming a FUNDING call can never be durable without the call's
// effect being decided in the same transaction, and vice versa.
//
// In a batch (batch_tx.go):
//
//	round trip 1  lock the transfer: SELECT ... FOR UPDATE WHERE req_id
//	              AND state = plan.at (the CAS's compare: when the row is
//	              elsewhere, or moves while we wait for its lock, the
//	              request is LOST and does nothing at all), or, with
//	              plan.insert, insert it in INIT (this transaction's own
//	              row: nobody else can see it, no lock needed); then the
//	              FUNDING reads, shared with the plain operations
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
// `bench transfer --clients 64` fsm_fused from 0.77x to 1.16x the naive
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
	op     Op        // the FUNDING operation; "" = none (only pre)
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
func (p *fusePlan) chain(o Outcome) []fuseCAS {
	out := slices.Clip(p.pre)
	switch o.Kind {
	case Success:
		out = append(out, p.ok...)
	case ExplicitFail:
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
// own, and the insert reports it held (queueInserts). It reports whether
// the batch has fused steps.
func queueFusedLocks(b *pgx.Batch, reqs []*batchReq, ans []batchAnswer) bool {
	var idx []int
	first := map[string]bool{}
	fused := false
	for i, r := range reqs {
		if r.kind != kindFused {
			continue
		}
		fused = true
		if !first[r.reqID] {
			first[r.reqID] = true
			if r.plan.insert == nil {
				idx = append(idx, i)
			}
		}
	}
	if len(idx) == 0 {
		return fused
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
		// The chain is legal (plan.legal) and runs under the row lock of
		// round trip 1, inside this one transaction: only its end is
		// written (from plan.at to the last state, with the last message
		// the chain leaves). cas still counts the transitions the FSM made.
		s, msg := r.plan.at, ""
		for _, c := range r.plan.chain(ans[i].out) {
			m := c.msg
			if c.outcome {
				m += ans[i].out.String()
			}
			if m != "" {
				msg = m
			}
			s = c.to
			ans[i].cas++
		}
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
	b.Queue(fusedCASSQL, ids, from, to, msgs, int64(n)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			t, err := scanTransfer(rows)
			if err != nil {
				return err
			}
			ans[at[t.ReqID]].transfer = t
		}
		return rows.Err()
	})
}
