package transfer

import "context"

// The FUNDING adapter's operations alone, for its own tests (spec 5, 9.3:
// idempotency by (req_id, op), refusals that stick, re-validation): the
// operation a fused step makes, in a transaction of the Batcher, without a
// transfer's transitions around it.

var _ Adapter = (*Funding)(nil)

func (f *Funding) Withdraw(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return f.apply(ctx, OpWithdraw, reqID, user, asset, amount)
}

func (f *Funding) Deposit(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return f.apply(ctx, OpDeposit, reqID, user, asset, amount)
}

func (f *Funding) Refund(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return f.apply(ctx, OpRefund, reqID, user, asset, amount)
}

func (f *Funding) apply(ctx context.Context, op Op, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	a := f.b.do(&batchReq{kind: kindFunding, ctx: ctx, op: op, reqID: reqID, user: user, asset: asset, amount: amount})
	if a.err != nil {
		return errorOutcome(ctx, a.err)
	}
	return a.out
}

// The FSM's program read as chains of states, for its exhaustive tests
// (fsm_step_test.go); the executor writes them as fused plans (fusePlan.chain).

// Then is the chain of transitions the step makes once its call answered
// k: Pre, then OK or Fail (only Pre for an outcome that says nothing).
func (st Step) Then(k OutcomeKind) []State {
	out := append([]State(nil), st.Pre...)
	switch k {
	case Success:
		out = append(out, st.OK...)
	case ExplicitFail:
		out = append(out, st.Fail...)
	}
	return out
}

// End is the state a chain leaves a transfer in that starts at `at`.
func End(at State, chain []State) State {
	if len(chain) == 0 {
		return at
	}
	return chain[len(chain)-1]
}
