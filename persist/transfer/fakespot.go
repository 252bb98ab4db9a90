package transfer

import (
	"context"
	"sync"
)

// FakeSpot is an in-memory SPOT side with the core's semantics (core/transfer.go):
// idempotent by (op, req_id), explicit failures recorded, refund only of a
// successful withdraw, deposits refused to DISABLED accounts, withdraws
// refused from FROZEN / DISABLED ones. For tests and for wiring before the
// core adapter exists; wrap it in Faulty to inject faults.
type FakeSpot struct {
	mu       sync.Mutex
	balances map[spotKey]Units // available, asset units
	status   map[UserID]AccountStatus
	ops      map[spotOpKey]spotOp
	external map[AssetID]Units // net external credits (Credit), asset units
}

type spotKey struct {
	user  UserID
	asset AssetID
}

type spotOpKey struct {
	op    Op
	reqID string
}

type spotOp struct {
	user   UserID
	asset  AssetID
	amount Units
	out    Outcome
}

// NewFakeSpot returns an empty SPOT side.
func NewFakeSpot() *FakeSpot {
	return &FakeSpot{balances: map[spotKey]Units{}, status: map[UserID]AccountStatus{},
		ops: map[spotOpKey]spotOp{}, external: map[AssetID]Units{}}
}

var _ Side = (*FakeSpot)(nil)

// Credit adds an external credit (the core's ADJUST), creating the account.
func (s *FakeSpot) Credit(user UserID, asset AssetID, amount Units) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.balances[spotKey{user, asset}] += amount
	s.external[asset] += amount
	if _, ok := s.status[user]; !ok {
		s.status[user] = Active
	}
}

// SetStatus sets a user's SPOT account status (creating the account).
func (s *FakeSpot) SetStatus(user UserID, st AccountStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status[user] = st
}

// Balance returns the user's available SPOT balance of asset.
func (s *FakeSpot) Balance(user UserID, asset AssetID) Units {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.balances[spotKey{user, asset}]
}

// Totals returns the sum of SPOT balances of asset and its net external credits.
func (s *FakeSpot) Totals(asset AssetID) (total, external Units) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.balances {
		if k.asset == asset {
			total += v
		}
	}
	return total, s.external[asset]
}

// AccountState implements AccountReader.
// View calls f under the fake's lock (one state of it) with every asset's
// total and external credits (copies) and whether (op, reqID) succeeded.
func (s *FakeSpot) View(f func(total, external map[AssetID]Units, succeeded func(op Op, reqID string) bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	total, external := map[AssetID]Units{}, make(map[AssetID]Units, len(s.external))
	for k, v := range s.balances {
		total[k.asset] += v
	}
	for a, v := range s.external {
		external[a] = v
	}
	f(total, external, func(op Op, id string) bool {
		r, seen := s.ops[spotOpKey{op, id}]
		return seen && r.out.Kind == Success
	})
}

func (s *FakeSpot) AccountState(_ context.Context, user UserID, asset AssetID) (AccountState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.status[user]
	if !ok {
		return AccountState{Status: Active}, nil
	}
	return AccountState{Exists: true, Status: st, Available: s.balances[spotKey{user, asset}]}, nil
}

func (s *FakeSpot) Withdraw(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return s.apply(OpWithdraw, reqID, user, asset, amount)
}

func (s *FakeSpot) Deposit(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return s.apply(OpDeposit, reqID, user, asset, amount)
}

func (s *FakeSpot) Refund(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return s.apply(OpRefund, reqID, user, asset, amount)
}

func (s *FakeSpot) apply(op Op, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	if o := checkParams(reqID, user, asset, amount); o != nil {
		return *o
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := spotOpKey{op, reqID}
	if r, seen := s.ops[k]; seen {
		if r.user != user || r.asset != asset || r.amount != amount {
			return unknown(string(CodeReqIDConflict))
		}
		return r.out
	}
	out := s.decide(op, reqID, user, asset, amount)
	s.ops[k] = spotOp{user, asset, amount, out}
	if out.Kind == Success {
		bk := spotKey{user, asset}
		if op == OpWithdraw {
			s.balances[bk] -= amount
		} else {
			s.balances[bk] += amount
			if _, ok := s.status[user]; !ok {
				s.status[user] = Active // lazy init of SPOT (spec 1.5.5)
			}
		}
	}
	return out
}

func (s *FakeSpot) decide(op Op, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	st, exists := s.status[user]
	switch op {
	case OpWithdraw:
		switch {
		case !exists:
			return fail(CodeInsufficientBalance)
		case st == Frozen:
			return fail(CodeAccountFrozen)
		case st == Disabled:
			return fail(CodeAccountDisabled)
		case s.balances[spotKey{user, asset}] < amount:
			return fail(CodeInsufficientBalance)
		}
	case OpDeposit:
		if st == Disabled {
			return fail(CodeAccountDisabled)
		}
	case OpRefund:
		w, ok := s.ops[spotOpKey{OpWithdraw, reqID}]
		if !ok || w.out.Kind != Success || w.user != user || w.asset != asset || w.amount != amount {
			return fail(CodeRefundWithoutWithdraw)
		}
	}
	return ok()
}
