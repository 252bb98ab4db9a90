package chaintx

// State is the transaction state machine (spec §4.2), the only vocabulary
// answers use. Nonce life is derived from it: a nonce exists from ALLOCATED on.
type State string

const (
	Created     State = "CREATED"      // intent stored, no nonce yet (e.g. a withdrawal's debit transaction)
	Allocated   State = "ALLOCATED"    // nonce allocated, signed, raw + hash stored; maybe not broadcast yet
	Tracking    State = "TRACKING"     // broadcast; waiting for receipt and finality
	Confirmed   State = "CONFIRMED"    // mined with status 1, `finality` blocks deep
	FailedFinal State = "FAILED_FINAL" // mined with status 0 (REVERTED), or its nonce went to a CANCEL / PLACEHOLDER (CANCELLED)
	Stuck       State = "STUCK"        // no receipt for StuckAfter; still tracked, an operator decides
)

// Sub-states (managed_tx.sub_state).
const (
	SubReverted  = "REVERTED"  // FAILED_FINAL: receipt status 0, the value did not move
	SubCancelled = "CANCELLED" // FAILED_FINAL: a CANCEL / PLACEHOLDER took the nonce
	SubReorged   = "REORGED"   // TRACKING: its receipt's block left the canonical chain
	// SubForeign: FAILED_FINAL by the operator's RESOLVE_FOREIGN: the nonce
	// is final on chain with a tx signed outside the exchange (none of ours).
	SubForeign = "FOREIGN_NONCE"
)

// Final reports whether no later state can follow.
func (s State) Final() bool { return s == Confirmed || s == FailedFinal }

// Valid reports whether s is one of the states.
func (s State) Valid() bool {
	switch s {
	case Created, Allocated, Tracking, Confirmed, FailedFinal, Stuck:
		return true
	}
	return false
}

// Pending reports whether the tx holds a nonce and has no final state.
func (s State) Pending() bool { return s == Allocated || s == Tracking || s == Stuck }
