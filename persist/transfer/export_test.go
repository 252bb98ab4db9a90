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
