package invariant

import (
	"math/big"

	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// movingTransfer is a transfer CheckInvariant accounts for one by one, as
// read in the Postgres snapshot P, with its FUNDING operations from P.
type movingTransfer struct {
	reqID      string
	transferID int64
	asset      transfer.AssetID
	amount     transfer.Units // asset units
	from, to   model.AccountType
	state      transfer.State
	funding    SpotOps // FUNDING operations applied (SUCCESS records in P)
}

// side returns the flags of account type t: FUNDING's from P, SPOT's from
// the core read C.
func (m movingTransfer) side(t model.AccountType, spot SpotOps) SpotOps {
	if t == model.AccountFunding {
		return m.funding
	}
	return spot
}

// ops returns the operations applied, each from the side it changes:
// withdraw and refund on the source, deposit on the target.
func (m movingTransfer) ops(spot SpotOps) (w, d, r bool) {
	src, dst := m.side(m.from, spot), m.side(m.to, spot)
	return src.Withdrawn, dst.Deposited, src.Refunded
}

// inFlight is the transfer's term: amount × (withdrawn − deposited −
// refunded), asset units.
func (m movingTransfer) inFlight(spot SpotOps) *big.Int {
	w, d, r := m.ops(spot)
	n := int64(0)
	for _, x := range [...]struct {
		on   bool
		sign int64
	}{{w, 1}, {d, -1}, {r, -1}} {
		if x.on {
			n += x.sign
		}
	}
	return new(big.Int).Mul(big.NewInt(int64(m.amount)), big.NewInt(n))
}

// check returns why the applied operations are impossible for a correct
// FSM, or "". C (the SPOT flags) is read before P (the FUNDING flags and
// the state), so:
//   - a flag seen true happened before P, on either side;
//   - a FUNDING flag seen false had not happened at P;
//   - a SPOT flag seen false may have happened between C and P: no
//     conclusion.
//
// Each case is needed and together they flag exactly the observations no
// execution produces (TestMovingTransferAgainstModel); deposited-and-
// refunded, say, falls to the state cases (a deposit needs TARGET_PENDING
// or COMMITTED, a refund COMPENSATING or ROLLED_BACK).
func (m movingTransfer) check(spot SpotOps) string {
	if wrong := m.wrongSide(spot); wrong != "" {
		return wrong
	}
	w, d, r := m.ops(spot)
	srcInP := m.from == model.AccountFunding // withdraw and refund read in P
	dstInP := m.to == model.AccountFunding   // deposit read in P
	st := m.state
	switch {
	case !st.Valid():
		return "invalid state"
	case r && !w:
		return "refunded without a withdraw"
	case w && (st == transfer.Init || st == transfer.Failed):
		return "withdrawn in state " + st.String()
	case d && st != transfer.TargetPending && st != transfer.Committed:
		return "deposited in state " + st.String()
	case r && st != transfer.Compensating && st != transfer.RolledBack:
		return "refunded in state " + st.String()
	case !w && srcInP && (st.InFlight() || st == transfer.Committed || st == transfer.RolledBack):
		return "state " + st.String() + " without its withdraw"
	case !d && dstInP && st == transfer.Committed:
		return "COMMITTED without its deposit"
	case !r && srcInP && st == transfer.RolledBack:
		return "ROLLED_BACK without its refund"
	}
	return ""
}

// wrongSide reports an operation recorded on the side it never happens on
// (a withdraw or refund on the target, a deposit on the source).
func (m movingTransfer) wrongSide(spot SpotOps) string {
	for _, t := range [...]model.AccountType{model.AccountFunding, model.AccountSpot} {
		f := m.side(t, spot)
		if t != m.from && (f.Withdrawn || f.Refunded) {
			return "withdraw or refund applied on the target " + string(t)
		}
		if t != m.to && f.Deposited {
			return "deposit applied on the source " + string(t)
		}
	}
	return ""
}

func (m movingTransfer) anomaly(spot SpotOps, why string) Anomaly {
	return Anomaly{ReqID: m.reqID, Asset: m.asset, From: m.from, State: m.state, Funding: m.funding, Spot: spot, Reason: why}
}
