package transfer

import (
	"context"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// The FUNDING adapter's operations alone, for its own tests (spec 5, 9.3:
// idempotency by (req_id, op), refusals that stick, re-validation): the
// operation a fused step makes, in a transaction of the Batcher, without a
// transfer's transitions around it.

var _ model.Adapter = (*Funding)(nil)

func (f *Funding) Withdraw(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) model.Outcome {
	return f.apply(ctx, model.OpWithdraw, reqID, user, asset, amount)
}

func (f *Funding) Deposit(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) model.Outcome {
	return f.apply(ctx, model.OpDeposit, reqID, user, asset, amount)
}

func (f *Funding) Refund(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) model.Outcome {
	return f.apply(ctx, model.OpRefund, reqID, user, asset, amount)
}

func (f *Funding) apply(ctx context.Context, op model.Op, reqID string, user UserID, asset AssetID, amount Units) model.Outcome {
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
func (st Step) Then(k model.OutcomeKind) []State {
	out := append([]State(nil), st.Pre...)
	switch k {
	case model.Success:
		out = append(out, st.OK...)
	case model.ExplicitFail:
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
