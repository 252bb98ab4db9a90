package service

import (
	"context"
	"errors"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// SpotAdapter is the SPOT side of internal transfers (transfer.Side) over
// the sequenced core: the core's SPOT_WITHDRAW / SPOT_DEPOSIT / SPOT_REFUND
// commands keyed by the transfer's req_id, idempotent in the core itself (a
// repeat returns the first result and changes nothing). An answer is given
// only once the command is durable. The core's refusals that are certain
// become EXPLICIT_FAIL; everything else (ring full, no answer in time,
// conflicts, a halted core) is TIMEOUT or UNKNOWN, which the FSM retries and
// never compensates.
type SpotAdapter struct {
	pl      *journal.Pipeline
	timeout time.Duration // how long a call waits for the durable answer before TIMEOUT
}

// NewSpotAdapter returns the SPOT adapter over pl; a call waits up to
// timeout for the core's durable answer, then reports TIMEOUT.
func NewSpotAdapter(pl *journal.Pipeline, timeout time.Duration) *SpotAdapter {
	return &SpotAdapter{pl: pl, timeout: timeout}
}

// explicitSpot are the core codes that mean "refused, nothing happened, and
// it never will for this req_id" (the core records failed ops by req_id).
// CORE_HALTED, TOO_MANY_OPS and TOO_MANY_USERS are explicit only when the
// core recorded them under the req_id (an EvTransfer in the answer): a
// refund refused by a halted core, or a refusal past the ops set's reserve,
// is not recorded, and a retry may succeed, so it is retried.
var explicitSpot = map[core.Code]bool{
	core.CodeInsufficientBalance:   true,
	core.CodeAccountFrozen:         true,
	core.CodeAccountDisabled:       true,
	core.CodeRefundWithoutWithdraw: true,
	core.CodeInvalidAsset:          true,
	core.CodeInvalidAmount:         true,
	core.CodeOverflow:              true,
}

func (a *SpotAdapter) Withdraw(ctx context.Context, reqID string, user transfer.UserID, asset transfer.AssetID, amount transfer.Units) model.Outcome {
	return a.do(ctx, core.KindSpotWithdraw, reqID, user, asset, amount)
}

func (a *SpotAdapter) Deposit(ctx context.Context, reqID string, user transfer.UserID, asset transfer.AssetID, amount transfer.Units) model.Outcome {
	return a.do(ctx, core.KindSpotDeposit, reqID, user, asset, amount)
}

func (a *SpotAdapter) Refund(ctx context.Context, reqID string, user transfer.UserID, asset transfer.AssetID, amount transfer.Units) model.Outcome {
	return a.do(ctx, core.KindSpotRefund, reqID, user, asset, amount)
}

func (a *SpotAdapter) do(ctx context.Context, kind core.Kind, reqID string, user core.UserID, asset core.AssetID, amount core.Units) model.Outcome {
	key, ok := core.KeyFrom(reqID)
	if !ok || amount <= 0 { // defense in depth: the coordinator validated already
		return model.Outcome{Kind: model.Unknown, Code: "INVALID_REQUEST"}
	}
	c := core.Command{Kind: kind, User: user, Asset: asset, Amount: amount, Key: key}
	r := journal.NewReply()
	if _, err := a.pl.TrySubmit(&c, r); err != nil {
		if errors.Is(err, journal.ErrBusy) {
			return model.Outcome{Kind: model.Timeout, Code: "SYSTEM_BUSY"}
		}
		return model.Outcome{Kind: model.Unknown, Code: err.Error()}
	}
	done := make(chan error, 1)
	go func() { done <- a.pl.Wait(r) }()
	t := time.NewTimer(a.timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return model.Outcome{Kind: model.Unknown, Code: err.Error()}
		}
	case <-t.C: // sequenced, maybe durable: the repeat by req_id will tell
		return model.Outcome{Kind: model.Timeout}
	case <-ctx.Done():
		return model.Outcome{Kind: model.Timeout, Code: ctx.Err().Error()}
	}
	res := r.Result()
	switch {
	case res.Code == core.OK:
		return model.Outcome{Kind: model.Success}
	case explicitSpot[res.Code], recordedSpot[res.Code] && recorded(r.Events, res.Code):
		return model.Outcome{Kind: model.ExplicitFail, Code: res.Code.String()}
	default:
		return model.Outcome{Kind: model.Unknown, Code: res.Code.String()}
	}
}

// recordedSpot are the codes that are explicit once recorded (see explicitSpot).
var recordedSpot = map[core.Code]bool{core.CodeCoreHalted: true, core.CodeTooManyOps: true, core.CodeTooManyUsers: true}

// recorded reports whether the core recorded the refusal code under the
// req_id: its answer carries the EvTransfer of the operation.
func recorded(evs []core.Event, code core.Code) bool {
	for i := range evs {
		if evs[i].Kind == core.EvTransfer && evs[i].Code == code {
			return true
		}
	}
	return false
}

// AccountState reads the SPOT account from the read view, with why the core
// could not take a transfer now (halted, ops set or user table full), so
// the transfer is refused before FUNDING moves. A user without an
// account yet exists for deposits (the core creates it) but has nothing.
func (a *SpotAdapter) AccountState(ctx context.Context, user transfer.UserID, asset transfer.AssetID) (model.AccountState, error) {
	var st model.AccountState
	err := a.pl.Read(func(p *core.Processor) error {
		status, exists := p.AccountStatusOf(user)
		st.Exists = exists
		st.Status = map[core.AccountStatus]model.AccountStatus{core.Active: model.Active,
			core.Frozen: model.Frozen, core.Disabled: model.Disabled}[status]
		st.Available = p.BalanceOf(user, asset).Avail
		switch {
		case p.Halted():
			st.Unavailable = model.CodeCoreHalted
		case p.OpsFull():
			st.Unavailable = model.CodeTooManyOps
		case !p.CanCreateAccount(user):
			st.Unavailable = model.CodeTooManyUsers
		}
		return nil
	})
	return st, err
}
