package transfer

import (
	"context"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// The core's typed integers, so a quantity cannot be passed as an id.
type (
	UserID  = core.UserID
	AssetID = core.AssetID
	Units   = core.Units // an amount in the asset's smallest unit
)

// AccountState is model.AccountState, the type of a side's answer that
// the stream package (whose code others own) still names from here.
type AccountState = model.AccountState

// transferType is transfers_tb.transfer_type / source_type: 1 when the
// source is FUNDING, 2 when it is SPOT (spec 7.1).
func transferType(from model.AccountType) int16 {
	if from == model.AccountFunding {
		return 1
	}
	return 2
}

// call makes operation op of t on a.
func call(ctx context.Context, a model.Adapter, op model.Op, t Transfer) model.Outcome {
	return model.Call(ctx, a, op, t.ReqID, t.UserID, t.Asset, t.Amount)
}
