package transfer

// The FSM's program (fsm.go) checked exhaustively, with no database: every
// state x every outcome kind x a reversible source or not.

import (
	"slices"
	"testing"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

var allKinds = []model.OutcomeKind{model.Unknown, model.Success, model.ExplicitFail, model.Timeout, model.Pending, model.NetworkError}

// wantAfter is spec 2.2/2.3 written out independently of fsm.go: the state
// a transfer in `at` is left in once its step's call answered k.
func wantAfter(at State, k model.OutcomeKind, reversible bool) State {
	switch at {
	case Init, SourcePending:
		switch k {
		case model.Success:
			return TargetPending // SOURCE_DONE, then TARGET_PENDING before the deposit
		case model.ExplicitFail:
			return Failed
		}
		return SourcePending
	case SourceDone, TargetPending:
		switch {
		case k == model.Success:
			return Committed
		case k == model.ExplicitFail && reversible:
			return Compensating
		}
		return TargetPending
	case Compensating:
		if k == model.Success {
			return RolledBack
		}
		return Compensating
	}
	return at
}

// callState is the state that must be durable when each op is called
// (persist-before-call), and the side it calls.
var callState = map[model.Op]struct {
	at   State
	role Role
}{model.OpWithdraw: {SourcePending, RoleSource}, model.OpDeposit: {TargetPending, RoleTarget}, model.OpRefund: {Compensating, RoleSource}}

func TestStepEveryStateEveryOutcome(t *testing.T) {
	for _, at := range AllStates {
		for _, rev := range []bool{true, false} {
			st, found := StepAt(at, rev)
			if found == at.Terminal() {
				t.Fatalf("%s: step found %v, terminal %v", at, found, at.Terminal())
			}
			if !found {
				continue
			}
			if st.At != at {
				t.Errorf("%s: step says it is at %s", at, st.At)
			}
			c, known := callState[st.Op]
			if !known || End(at, st.Pre) != c.at || st.Role != c.role {
				t.Errorf("%s: calls %s (role %d) in %s, want the state %s durable first", at, st.Op, st.Role, End(at, st.Pre), c.at)
			}
			for _, k := range allKinds {
				chain := st.Then(k)
				s := at
				for _, next := range chain {
					if !CanTransition(s, next) {
						t.Errorf("%s %s: chain %v makes the illegal move %s -> %s", at, k, chain, s, next)
					}
					s = next
				}
				if got, want := End(at, chain), wantAfter(at, k, rev); got != want {
					t.Errorf("%s %s (reversible %v): ends in %s, want %s", at, k, rev, got, want)
				}
				if moves := st.Moves(k); moves != (k == model.Success || (k == model.ExplicitFail && End(at, chain) != End(at, st.Pre))) {
					t.Errorf("%s %s: Moves = %v", at, k, moves)
				}
				// Only EXPLICIT_FAIL moves backwards (2.3).
				back := slices.ContainsFunc(chain, func(s State) bool { return s == Failed || s == Compensating })
				if back && k != model.ExplicitFail {
					t.Errorf("%s %s: chain %v moves backwards on an outcome that is not EXPLICIT_FAIL", at, k, chain)
				}
			}
			if st.Fail != nil && st.FailMsg == "" {
				t.Errorf("%s: a refusal writes no reason", at)
			}
		}
	}
}

// TestStepsReachTerminal walks every state through every sequence of
// acted-on outcomes: SUCCESS alone ends COMMITTED, a refusal at the source
// FAILED, at the target ROLLED_BACK after the refund, within four steps.
func TestStepsReachTerminal(t *testing.T) {
	var walk func(s State, depth int, path []State)
	walk = func(s State, depth int, path []State) {
		if s.Terminal() {
			return
		}
		if depth > 4 {
			t.Fatalf("no terminal state after %v", path)
		}
		st, found := StepAt(s, true)
		if !found {
			t.Fatalf("%s: non-terminal without a step (path %v)", s, path)
		}
		for _, k := range []model.OutcomeKind{model.Success, model.ExplicitFail} {
			if st.Moves(k) {
				end := End(s, st.Then(k))
				walk(end, depth+1, append(slices.Clone(path), end))
			}
		}
	}
	for _, at := range AllStates {
		walk(at, 0, []State{at})
	}
}
