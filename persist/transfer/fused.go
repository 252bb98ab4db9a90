package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// The Coordinator's side of fused steps (batch_fused.go). Every step that
// calls FUNDING is one fused step, one transaction of the Batcher:
//
//	FUNDING->SPOT  INIT|SOURCE_PENDING: [->SOURCE_PENDING], withdraw,
//	                   SUCCESS: ->SOURCE_DONE ->TARGET_PENDING; EXPLICIT_FAIL: ->FAILED
//	               (SPOT deposit, outside Postgres; SUCCESS: CAS ->COMMITTED)
//	               TARGET_PENDING after the deposit's EXPLICIT_FAIL: ->COMPENSATING,
//	                   refund, SUCCESS: ->ROLLED_BACK
//	               COMPENSATING: refund, SUCCESS: ->ROLLED_BACK
//	SPOT->FUNDING  (CAS INIT->SOURCE_PENDING, durable before the SPOT withdraw)
//	               SOURCE_PENDING after the withdraw's SUCCESS: ->SOURCE_DONE
//	                   ->TARGET_PENDING, deposit, SUCCESS: ->COMMITTED;
//	                   EXPLICIT_FAIL: ->COMPENSATING (the SPOT refund follows)
//	               SOURCE_DONE|TARGET_PENDING: [->TARGET_PENDING], deposit, likewise
//
// The other moves (SPOT calls, the CAS after a SPOT deposit or refund) are
// CAS transitions of the same Batcher. A fused step finds any state a crash
// may leave (or an earlier release left, a crash between a call and its
// CAS included: the FUNDING operation is idempotent, so its repeat returns
// the recorded first outcome and the transitions follow it).

// fusedAnswer is one fused step's answer.
type fusedAnswer struct {
	inserted bool          // plan.insert: the transfer was inserted
	transfer Transfer      // won and cas > 0: the row as the last transition left it; else, inserted: as inserted
	won      bool          // the transfer was in plan.at: the step ran
	out      model.Outcome // the FUNDING operation's outcome (won)
	state    State         // the state reached (won)
	cas      int           // transitions made (won)
	err      error         // the batch failed or its commit is unconfirmed: the outcome is unknown
}

// fused runs plan on t as one transaction of b.
func (b *Batcher) fused(ctx context.Context, t Transfer, plan *fusePlan) fusedAnswer {
	if !plan.legal() {
		return fusedAnswer{err: errors.New("transfer: fused plan outside the transition table")}
	}
	a := b.do(&batchReq{kind: kindFused, ctx: ctx, reqID: t.ReqID, op: plan.op, user: t.UserID, asset: t.Asset,
		amount: t.Amount, plan: plan})
	if a.err != nil {
		return fusedAnswer{err: a.err}
	}
	return fusedAnswer{inserted: a.inserted, transfer: a.transfer, won: a.won, out: a.out, state: a.state, cas: a.cas}
}

// runFused runs plan on *t and reports, as step does, what it did (on
// movedKnown *t is the row as the step left it).
func (c *Coordinator) runFused(ctx context.Context, t *Transfer, plan *fusePlan) move {
	return c.afterFused(ctx, t, plan, c.cfg.Store.b.fused(ctx, *t, plan))
}

// afterFused is runFused's handling of plan's answer a.
func (c *Coordinator) afterFused(ctx context.Context, t *Transfer, plan *fusePlan, a fusedAnswer) move {
	if a.err != nil {
		c.unknown(ctx, *t, plan.op, errorOutcome(ctx, a.err))
		return stayed
	}
	if !a.won {
		c.stats.CASLost.Add(1)
		return moved // another driver moved it: re-read
	}
	c.stats.CASWon.Add(int64(a.cas))
	if a.cas > 0 {
		*t = a.transfer
		if c.cfg.OnCommit != nil {
			c.cfg.OnCommit(a.transfer)
		}
	}
	if a.cas > 0 {
		c.reached(*t, a.out)
	}
	if plan.op != "" && a.out.Kind != model.Success && (a.out.Kind != model.ExplicitFail || len(plan.fail) == 0) {
		// Unknown, or a refusal this step cannot act on (a refund's: only
		// SUCCESS leaves COMPENSATING): stays (after plan.pre), retry later.
		c.unknown(ctx, *t, plan.op, a.out)
		return stayed
	}
	if a.cas == 0 {
		return stayed // nothing moved
	}
	return movedKnown
}

// insertFused stores t in INIT and makes its first move in the same
// transaction: FUNDING->SPOT ->SOURCE_PENDING, the withdraw and what
// follows it (as fusedStep from INIT); SPOT->FUNDING ->SOURCE_PENDING,
// durable before the SPOT withdraw. It answers as Store.Insert does, and
// known=true when got is the state this driver just left the transfer in
// (the caller may step from it without re-reading).
func (c *Coordinator) insertFused(ctx context.Context, t Transfer) (got Transfer, inserted, known bool, err error) {
	st, _ := StepAt(Init, t.From.Reversible())
	plan := &fusePlan{insert: &t, at: Init, pre: chainCAS(st.Pre, "", false)}
	if st.Side(t.From, t.To) == model.AccountFunding {
		plan.op, plan.ok, plan.fail = st.Op, chainCAS(st.OK, "", false), chainCAS(st.Fail, st.FailMsg, true)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CallTimeout)
	defer cancel()
	a := c.cfg.Store.b.fused(sctx, t, plan)
	switch {
	case a.err != nil:
		return Transfer{}, false, false, fmt.Errorf("transfer: insert %s: %w", t.ReqID, a.err)
	case !a.inserted: // the cid is taken, as in Store.Insert
		got, err = c.cfg.Store.GetByCID(ctx, t.UserID, t.CID)
		return got, false, false, err
	}
	got = a.transfer
	if !a.won { // cannot happen (the row is this transaction's own): re-read
		return got, true, false, nil
	}
	return got, true, c.afterFused(sctx, &got, plan, a) == movedKnown, nil
}
