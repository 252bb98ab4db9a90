package transfer

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// The FUNDING adapter's operations alone, for its own tests (spec 5, 9.3:
// idempotency by (req_id, op), refusals that stick, re-validation), on the
// one path: each call is a fused step of the Batcher (opReq) whose plan has
// no transition, so the same (req_id, op) can be called again and again.
// Its transfer is the req_id's row, at the state it is in, or else a holder
// row (holdSQL) in a terminal state, locked as every fused step locks its
// transfer and never moved.

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
	var at int16
	if err := hold(ctx, f.pool, reqID); err != nil {
		return errorOutcome(ctx, err)
	}
	if err := f.pool.QueryRow(ctx, `SELECT state FROM transfers_tb WHERE req_id = $1`, reqID).Scan(&at); err != nil {
		return errorOutcome(ctx, err)
	}
	r := opReq(op, reqID, user, asset, amount)
	r.ctx, r.plan.at = ctx, State(at)
	a := f.b.do(r)
	if a.err != nil {
		return errorOutcome(ctx, a.err)
	}
	return a.out
}

// holdSQL inserts the holder transfer of an operation's req_id (opReq).
const holdSQL = `INSERT INTO transfers_tb
	(req_id, user_id, asset_id, amount, transfer_type, source_type, from_account, to_account, state)
	SELECT id, 1, 1, 1, 1, 1, 'FUNDING', 'SPOT', 40 FROM unnest($1::text[]) AS id
	ON CONFLICT (req_id) DO NOTHING`

// hold inserts the holder transfers of ids (opReq), if missing.
func hold(ctx context.Context, pool *pgxpool.Pool, ids ...string) error {
	_, err := pool.Exec(ctx, holdSQL, ids)
	return err
}

// opReq is a FUNDING operation alone as a fused step: a plan at its holder
// transfer's state (hold) with no transition. A second fused step of one
// req_id in a batch is LOST (queueFusedLocks), as a racing driver's is.
func opReq(op model.Op, reqID string, user UserID, asset AssetID, amount Units) *batchReq {
	return &batchReq{kind: kindFused, plan: &fusePlan{at: Committed, op: op},
		op: op, reqID: reqID, user: user, asset: asset, amount: amount}
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
