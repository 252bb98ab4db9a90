package transfer

import "strconv"

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
