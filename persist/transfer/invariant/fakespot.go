package invariant

import (
	"context"

	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/fakespot"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// FakeSpotReader is the SpotReader of a fakespot.Spot (tests, bench):
// totals, external credits and the asked operations from one state of the
// fake, as the core answers from one state.
type FakeSpotReader struct{ *fakespot.Spot }

var _ SpotReader = FakeSpotReader{}

func (r FakeSpotReader) SpotSnapshot(_ context.Context, reqIDs []string) (SpotSnapshot, error) {
	snap := SpotSnapshot{Total: map[transfer.AssetID]transfer.Units{}, Ops: make(map[string]SpotOps, len(reqIDs))}
	r.View(func(total, external map[transfer.AssetID]transfer.Units, succeeded func(model.Op, string) bool) {
		snap.Total, snap.Adjustments = total, external
		for _, id := range reqIDs {
			snap.Ops[id] = SpotOps{Withdrawn: succeeded(model.OpWithdraw, id), Deposited: succeeded(model.OpDeposit, id),
				Refunded: succeeded(model.OpRefund, id)}
		}
	})
	return snap, nil
}
