package invariant

import (
	"context"

	"github.com/ubscore/ubscore/persist/transfer"
)

// FakeSpotReader is the SpotReader of a transfer.FakeSpot (tests, bench):
// totals, external credits and the asked operations from one state of the
// fake, as the core answers from one state.
type FakeSpotReader struct{ *transfer.FakeSpot }

var _ SpotReader = FakeSpotReader{}

func (r FakeSpotReader) SpotSnapshot(_ context.Context, reqIDs []string) (SpotSnapshot, error) {
	snap := SpotSnapshot{Total: map[transfer.AssetID]transfer.Units{}, Ops: make(map[string]SpotOps, len(reqIDs))}
	r.View(func(total, external map[transfer.AssetID]transfer.Units, succeeded func(transfer.Op, string) bool) {
		snap.Total, snap.Adjustments = total, external
		for _, id := range reqIDs {
			snap.Ops[id] = SpotOps{Withdrawn: succeeded(transfer.OpWithdraw, id), Deposited: succeeded(transfer.OpDeposit, id),
				Refunded: succeeded(transfer.OpRefund, id)}
		}
	})
	return snap, nil
}
