package transfer

import (
	"strconv"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// State is a transfer's FSM state; the values are the spec's ids (2.1) and
// are stored as-is in transfers_tb.state.
type State int16

const (
	Init          State = 0   // request accepted, funds in the source
	SourcePending State = 10  // persisted before the source withdraw is called
	SourceDone    State = 20  // source debited: funds in flight
	TargetPending State = 30  // persisted before the target deposit is called
	Committed     State = 40  // terminal: funds in the target
	Failed        State = -10 // terminal: source refused, nothing moved
	Compensating  State = -20 // target refused explicitly: refunding the source
	RolledBack    State = -30 // terminal: source refunded
)

// AllStates lists every state, for exhaustive tests and scans.
var AllStates = [...]State{Init, SourcePending, SourceDone, TargetPending, Committed, Failed, Compensating, RolledBack}

// legal is THE transition table (spec 2.2); nothing else decides whether a
// state change is allowed. Staying in a state (retry) is not a transition.
var legal = map[State][]State{
	Init:          {SourcePending},
	SourcePending: {SourceDone, Failed},
	SourceDone:    {TargetPending},
	TargetPending: {Committed, Compensating},
	Compensating:  {RolledBack},
}

// CanTransition reports whether from -> to is in the transition table.
func CanTransition(from, to State) bool {
	for _, s := range legal[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Terminal reports whether s is final: COMMITTED, FAILED or ROLLED_BACK.
func (s State) Terminal() bool { return s == Committed || s == Failed || s == RolledBack }

// Valid reports whether s is one of the eight states.
func (s State) Valid() bool {
	for _, v := range AllStates {
		if v == s {
			return true
		}
	}
	return false
}

// InFlight reports whether the funds have certainly left the source and not
// yet reached the target or come back (spec 7.2: SOURCE_DONE,
// TARGET_PENDING, COMPENSATING).
func (s State) InFlight() bool { return s == SourceDone || s == TargetPending || s == Compensating }

var stateNames = map[State]string{
	Init: "INIT", SourcePending: "SOURCE_PENDING", SourceDone: "SOURCE_DONE", TargetPending: "TARGET_PENDING",
	Committed: "COMMITTED", Failed: "FAILED", Compensating: "COMPENSATING", RolledBack: "ROLLED_BACK",
}

func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return "STATE(" + strconv.Itoa(int(s)) + ")"
}

// Role names the side of a transfer a step calls: its source or its target.
type Role uint8

const (
	RoleSource Role = iota + 1
	RoleTarget
)

// Step is what the FSM does in one non-terminal state (spec 9.2 step()):
// the transitions to make before the call (durable before it is made:
// persist-before-call), the call, and the transitions each outcome
// leads to. An outcome's transitions run on to the state naming the next
// call (its Pre), so whoever writes them leaves the transfer ready for that
// call. Only EXPLICIT_FAIL moves backwards; any other outcome but SUCCESS
// leaves the transfer after Pre, to be retried (2.3).
type Step struct {
	At      State
	Pre     []State // before the call, whatever its outcome
	Role    Role    // the side called
	Op      model.Op
	OK      []State // after SUCCESS
	Fail    []State // after EXPLICIT_FAIL; nil: a refusal changes nothing (stay, retry, alert)
	FailMsg string  // the error_message a refusal writes, before the outcome
}

// steps is the FSM's program, one entry per non-terminal state; nothing
// else decides what a step calls or where its outcome leads.
var steps = map[State]Step{
	Init: {At: Init, Pre: []State{SourcePending}, Role: RoleSource, Op: model.OpWithdraw,
		OK: []State{SourceDone, TargetPending}, Fail: []State{Failed}, FailMsg: "source withdraw: "},
	SourcePending: {At: SourcePending, Role: RoleSource, Op: model.OpWithdraw,
		OK: []State{SourceDone, TargetPending}, Fail: []State{Failed}, FailMsg: "source withdraw: "},
	SourceDone: {At: SourceDone, Pre: []State{TargetPending}, Role: RoleTarget, Op: model.OpDeposit,
		OK: []State{Committed}, Fail: []State{Compensating}, FailMsg: "target deposit: "},
	TargetPending: {At: TargetPending, Role: RoleTarget, Op: model.OpDeposit,
		OK: []State{Committed}, Fail: []State{Compensating}, FailMsg: "target deposit: "},
	Compensating: {At: Compensating, Role: RoleSource, Op: model.OpRefund, OK: []State{RolledBack}},
}

// StepAt returns the step of state s for a transfer whose source is
// reversible or not (2.2 "SOURCE REVERSIBLE?": a target's refusal may
// compensate only a reversible source); false for a terminal or unknown s.
func StepAt(s State, reversible bool) (Step, bool) {
	st, found := steps[s]
	if found && st.Op == model.OpDeposit && !reversible {
		st.Fail = nil
	}
	return st, found
}

// Moves reports whether the step acts on outcome k (SUCCESS always; an
// EXPLICIT_FAIL when the step has a Fail chain); any other answer is
// unknown: the transfer stays after Pre and the call is retried.
func (st Step) Moves(k model.OutcomeKind) bool {
	return k == model.Success || (k == model.ExplicitFail && st.Fail != nil)
}

// Side returns the account the step calls for a transfer from -> to.
func (st Step) Side(from, to model.AccountType) model.AccountType {
	if st.Role == RoleSource {
		return from
	}
	return to
}
