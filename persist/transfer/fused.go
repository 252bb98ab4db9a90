package transfer

import (
	"context"
	"errors"
	"fmt"
)

// The Coordinator's side of fused steps (batch_fused.go). With Config.Fuse
// set and the FUNDING side the plain *Funding of a Batcher on the Store's
// database, every step that calls FUNDING runs as one fused step:
//
//	FUNDING->SPOT  INIT|SOURCE_PENDING: [->SOURCE_PENDING], withdraw,
//	                   SUCCESS: ->SOURCE_DONE ->TARGET_PENDING; EXPLICIT_FAIL: ->FAILED
//	               (SPOT deposit, outside Postgres; SUCCESS: plain CAS ->COMMITTED)
//	               TARGET_PENDING after the deposit's EXPLICIT_FAIL: ->COMPENSATING,
//	                   refund, SUCCESS: ->ROLLED_BACK
//	               COMPENSATING: refund, SUCCESS: ->ROLLED_BACK
//	SPOT->FUNDING  (plain CAS INIT->SOURCE_PENDING, durable before the SPOT withdraw)
//	               SOURCE_PENDING after the withdraw's SUCCESS: ->SOURCE_DONE
//	                   ->TARGET_PENDING, deposit, SUCCESS: ->COMMITTED;
//	                   EXPLICIT_FAIL: ->COMPENSATING (the SPOT refund follows unfused)
//	               SOURCE_DONE|TARGET_PENDING: [->TARGET_PENDING], deposit, likewise
//
// Every other step (SPOT calls, SOURCE_DONE of FUNDING->SPOT, the CAS after
// a SPOT deposit or refund) is the unfused one. A fused step finds any
// state the unfused path may leave (a crash between a call and its CAS
// included: the FUNDING operation is idempotent, so its repeat returns the
// recorded first outcome and the transitions follow it). Otherwise (the
// FUNDING side wrapped, e.g. in Faulty; another database; no Batcher; a
// parameter checkParams refuses) the coordinator runs the unfused path.

// fuser returns the FUNDING adapter fused steps go through, nil if none.
func fuser(cfg Config) *Funding {
	if !cfg.Fuse {
		return nil
	}
	f, isFunding := cfg.Funding.(*Funding)
	if !isFunding || f == nil || f.b == nil || f.pool != cfg.Store.pool {
		return nil
	}
	return f
}

// Fused reports whether the coordinator runs fused steps (Config.Fuse and a
// FUNDING side that allows them).
func (c *Coordinator) Fused() bool { return c.fuse != nil }

// fusedAnswer is one fused step's answer.
type fusedAnswer struct {
	inserted bool     // plan.insert: the transfer was inserted
	transfer Transfer // won and cas > 0: the row as the last transition left it; else, inserted: as inserted
	won      bool     // the transfer was in plan.at: the step ran
	out      Outcome  // the FUNDING operation's outcome (won)
	state    State    // the state reached (won)
	cas      int      // transitions made (won)
	err      error    // the batch failed or its commit is unconfirmed: the outcome is unknown
}

// fused runs plan on t as one transaction of f's Batcher.
func (f *Funding) fused(ctx context.Context, t Transfer, plan *fusePlan) fusedAnswer {
	if !plan.legal() {
		return fusedAnswer{err: errors.New("transfer: fused plan outside the transition table")}
	}
	a := f.b.do(&batchReq{kind: kindFused, ctx: ctx, reqID: t.ReqID, op: plan.op, user: t.UserID, asset: t.Asset,
		amount: t.Amount, plan: plan})
	if a.err != nil {
		return fusedAnswer{err: a.err}
	}
	return fusedAnswer{inserted: a.inserted, transfer: a.transfer, won: a.won, out: a.out, state: a.state, cas: a.cas}
}

// fusable reports whether t's FUNDING operations may run fused.
func (c *Coordinator) fusable(t Transfer) bool {
	return c.fuse != nil && checkParams(t.ReqID, t.UserID, t.Asset, t.Amount) == nil
}

// runFused runs plan on *t and reports, as step does, what it did (on
// movedKnown *t is the row as the step left it).
func (c *Coordinator) runFused(ctx context.Context, t *Transfer, plan *fusePlan) move {
	return c.afterFused(ctx, t, plan, c.fuse.fused(ctx, *t, plan))
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
	if plan.op != "" && a.out.Kind != Success && (a.out.Kind != ExplicitFail || len(plan.fail) == 0) {
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
	st, _ := StepAt(Init, t.From.reversible())
	plan := &fusePlan{insert: &t, at: Init, pre: chainCAS(st.Pre, "", false)}
	if st.Side(t.From, t.To) == AccountFunding {
		plan.op, plan.ok, plan.fail = st.Op, chainCAS(st.OK, "", false), chainCAS(st.Fail, st.FailMsg, true)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CallTimeout)
	defer cancel()
	a := c.fuse.fused(sctx, t, plan)
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
