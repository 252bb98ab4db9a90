package model

import "context"

// Adapter is one side of a transfer (spec 5, 9.3). Every method is
// idempotent by (reqID, op): a repeat returns the first call's outcome and
// changes nothing, and an operation once refused explicitly never succeeds
// later. Refund undoes a successful Withdraw of the same reqID and
// parameters. Implementations re-validate their inputs (defense in depth)
// and answer Success or ExplicitFail only when they know; anything else is
// Timeout, Pending, NetworkError or Unknown, and the FSM retries.
type Adapter interface {
	Withdraw(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome
	Deposit(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome
	Refund(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome
}

// AccountReader reports one account's state for validation (step 9).
type AccountReader interface {
	AccountState(ctx context.Context, user UserID, asset AssetID) (AccountState, error)
}

// Side is one account type's adapter plus its account reader. FUNDING is
// *Funding; SPOT is implemented over the core's idempotent SPOT_DEPOSIT /
// SPOT_WITHDRAW / SPOT_REFUND commands (keyed by core.KeyFrom(req_id)) by
// the server, and by fakespot.Spot in tests.
type Side interface {
	Adapter
	AccountReader
}

// Call makes operation op of a.
func Call(ctx context.Context, a Adapter, op Op, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	switch op {
	case OpWithdraw:
		return a.Withdraw(ctx, reqID, user, asset, amount)
	case OpDeposit:
		return a.Deposit(ctx, reqID, user, asset, amount)
	case OpRefund:
		return a.Refund(ctx, reqID, user, asset, amount)
	}
	return UnknownOutcome("unknown op " + string(op))
}
