// Package fakespot is an in-memory SPOT side with the core's semantics, a
// model.Side for tests and the transfer benchmark (wrap it in
// transferfault.Faulty to inject faults).
package fakespot

import (
	"context"
	"sync"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// Spot is an in-memory SPOT side with the core's semantics (core/transfer.go):
// idempotent by (op, req_id), explicit failures recorded, refund only of a
// successful withdraw, deposits refused to DISABLED accounts, withdraws
// refused from FROZEN / DISABLED ones. For tests and for wiring before the
// core adapter exists.
type Spot struct {
	mu       sync.Mutex
	balances map[spotKey]model.Units // available, asset units
	status   map[model.UserID]model.AccountStatus
	ops      map[spotOpKey]spotOp
	external map[model.AssetID]model.Units // net external credits (Credit), asset units
}

type spotKey struct {
	user  model.UserID
	asset model.AssetID
}

type spotOpKey struct {
	op    model.Op
	reqID string
}

type spotOp struct {
	user   model.UserID
	asset  model.AssetID
	amount model.Units
	out    model.Outcome
}

// New returns an empty SPOT side.
func New() *Spot {
	return &Spot{balances: map[spotKey]model.Units{}, status: map[model.UserID]model.AccountStatus{},
		ops: map[spotOpKey]spotOp{}, external: map[model.AssetID]model.Units{}}
}

var _ model.Side = (*Spot)(nil)

// Credit adds an external credit (the core's ADJUST), creating the account.
func (s *Spot) Credit(user model.UserID, asset model.AssetID, amount model.Units) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.balances[spotKey{user, asset}] += amount
	s.external[asset] += amount
	if _, ok := s.status[user]; !ok {
		s.status[user] = model.Active
	}
}

// SetStatus sets a user's SPOT account status (creating the account).
func (s *Spot) SetStatus(user model.UserID, st model.AccountStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status[user] = st
}

// Balance returns the user's available SPOT balance of asset.
func (s *Spot) Balance(user model.UserID, asset model.AssetID) model.Units {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.balances[spotKey{user, asset}]
}

// Totals returns the sum of SPOT balances of asset and its net external credits.
func (s *Spot) Totals(asset model.AssetID) (total, external model.Units) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.balances {
		if k.asset == asset {
			total += v
		}
	}
	return total, s.external[asset]
}

// View calls f under the fake's lock (one state of it) with every asset's
// total and external credits (copies) and whether (op, reqID) succeeded.
func (s *Spot) View(f func(total, external map[model.AssetID]model.Units, succeeded func(op model.Op, reqID string) bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	total, external := map[model.AssetID]model.Units{}, make(map[model.AssetID]model.Units, len(s.external))
	for k, v := range s.balances {
		total[k.asset] += v
	}
	for a, v := range s.external {
		external[a] = v
	}
	f(total, external, func(op model.Op, id string) bool {
		r, seen := s.ops[spotOpKey{op, id}]
		return seen && r.out.Kind == model.Success
	})
}

// AccountState implements model.AccountReader.
func (s *Spot) AccountState(_ context.Context, user model.UserID, asset model.AssetID) (model.AccountState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.status[user]
	if !ok {
		return model.AccountState{Status: model.Active}, nil
	}
	return model.AccountState{Exists: true, Status: st, Available: s.balances[spotKey{user, asset}]}, nil
}

func (s *Spot) Withdraw(ctx context.Context, reqID string, user model.UserID, asset model.AssetID, amount model.Units) model.Outcome {
	return s.apply(model.OpWithdraw, reqID, user, asset, amount)
}

func (s *Spot) Deposit(ctx context.Context, reqID string, user model.UserID, asset model.AssetID, amount model.Units) model.Outcome {
	return s.apply(model.OpDeposit, reqID, user, asset, amount)
}

func (s *Spot) Refund(ctx context.Context, reqID string, user model.UserID, asset model.AssetID, amount model.Units) model.Outcome {
	return s.apply(model.OpRefund, reqID, user, asset, amount)
}

func (s *Spot) apply(op model.Op, reqID string, user model.UserID, asset model.AssetID, amount model.Units) model.Outcome {
	if o := model.CheckParams(reqID, user, asset, amount); o != nil {
		return *o
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := spotOpKey{op, reqID}
	if r, seen := s.ops[k]; seen {
		if r.user != user || r.asset != asset || r.amount != amount {
			return model.UnknownOutcome(string(model.CodeReqIDConflict))
		}
		return r.out
	}
	out := s.decide(op, reqID, user, asset, amount)
	s.ops[k] = spotOp{user, asset, amount, out}
	if out.Kind == model.Success {
		bk := spotKey{user, asset}
		if op == model.OpWithdraw {
			s.balances[bk] -= amount
		} else {
			s.balances[bk] += amount
			if _, ok := s.status[user]; !ok {
				s.status[user] = model.Active // lazy init of SPOT (spec 1.5.5)
			}
		}
	}
	return out
}

func (s *Spot) decide(op model.Op, reqID string, user model.UserID, asset model.AssetID, amount model.Units) model.Outcome {
	st, exists := s.status[user]
	switch op {
	case model.OpWithdraw:
		switch {
		case !exists:
			return model.Fail(model.CodeInsufficientBalance)
		case st == model.Frozen:
			return model.Fail(model.CodeAccountFrozen)
		case st == model.Disabled:
			return model.Fail(model.CodeAccountDisabled)
		case s.balances[spotKey{user, asset}] < amount:
			return model.Fail(model.CodeInsufficientBalance)
		}
	case model.OpDeposit:
		if st == model.Disabled {
			return model.Fail(model.CodeAccountDisabled)
		}
	case model.OpRefund:
		w, ok := s.ops[spotOpKey{model.OpWithdraw, reqID}]
		if !ok || w.out.Kind != model.Success || w.user != user || w.asset != asset || w.amount != amount {
			return model.Fail(model.CodeRefundWithoutWithdraw)
		}
	}
	return model.OK()
}
