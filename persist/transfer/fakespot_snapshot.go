package transfer

import "context"

var _ SpotReader = (*FakeSpot)(nil)

// SpotSnapshot implements SpotReader: totals, external credits and the
// asked operations under one lock, as the core answers from one state.
func (s *FakeSpot) SpotSnapshot(_ context.Context, reqIDs []string) (SpotSnapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := SpotSnapshot{Total: map[AssetID]Units{}, Adjustments: make(map[AssetID]Units, len(s.external)),
		Ops: make(map[string]SpotOps, len(reqIDs))}
	for k, v := range s.balances {
		snap.Total[k.asset] += v
	}
	for a, v := range s.external {
		snap.Adjustments[a] = v
	}
	applied := func(op Op, id string) bool {
		r, seen := s.ops[spotOpKey{op, id}]
		return seen && r.out.Kind == Success
	}
	for _, id := range reqIDs {
		snap.Ops[id] = SpotOps{Withdrawn: applied(OpWithdraw, id), Deposited: applied(OpDeposit, id),
			Refunded: applied(OpRefund, id)}
	}
	return snap, nil
}
