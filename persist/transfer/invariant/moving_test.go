package invariant

// This test proves the per-transfer part of the conservation check against
// a naive model: every execution of the FSM (commit, source refusal,
// rollback), in both directions, observed with the SPOT side read at any
// point and the FUNDING side (and the state) at any later point. The
// transfer's term makes the two sides' effects sum to exactly zero at every
// such pair of points, and check() flags exactly the observations that no
// execution can produce.

import (
	"fmt"
	"testing"

	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// fsmEvent is one step of an execution: a state change or an applied operation.
type fsmEvent struct {
	cas transfer.State // 0 with op set: an operation
	op  model.Op
}

var fsmPaths = map[string][]fsmEvent{
	"commit":   {{cas: transfer.SourcePending}, {op: model.OpWithdraw}, {cas: transfer.SourceDone}, {cas: transfer.TargetPending}, {op: model.OpDeposit}, {cas: transfer.Committed}},
	"failed":   {{cas: transfer.SourcePending}, {cas: transfer.Failed}},
	"rollback": {{cas: transfer.SourcePending}, {op: model.OpWithdraw}, {cas: transfer.SourceDone}, {cas: transfer.TargetPending}, {cas: transfer.Compensating}, {op: model.OpRefund}, {cas: transfer.RolledBack}},
}

type observation struct {
	from          model.AccountType
	state         transfer.State
	funding, spot SpotOps
}

func setOp(o *SpotOps, op model.Op) {
	switch op {
	case model.OpWithdraw:
		o.Withdrawn = true
	case model.OpDeposit:
		o.Deposited = true
	case model.OpRefund:
		o.Refunded = true
	}
}

// effects replays events: each side's flags and balance change (asset units).
func effects(events []fsmEvent, from, to model.AccountType, amount int64) (state transfer.State, funding, spot SpotOps, fundDelta, spotDelta int64) {
	for _, e := range events {
		if e.op == "" {
			state = e.cas
			continue
		}
		side, delta := from, amount
		switch e.op {
		case model.OpWithdraw:
			delta = -amount
		case model.OpDeposit:
			side = to
		}
		if side == model.AccountFunding {
			setOp(&funding, e.op)
			fundDelta += delta
		} else {
			setOp(&spot, e.op)
			spotDelta += delta
		}
	}
	return
}

func allSpotOps() []SpotOps {
	var out []SpotOps
	for i := 0; i < 8; i++ {
		out = append(out, SpotOps{Withdrawn: i&1 != 0, Deposited: i&2 != 0, Refunded: i&4 != 0})
	}
	return out
}

func TestMovingTransferAgainstModel(t *testing.T) {
	const amount = 1_000
	legal := map[observation]bool{}
	for _, from := range []model.AccountType{model.AccountFunding, model.AccountSpot} {
		to := model.AccountSpot
		if from == model.AccountSpot {
			to = model.AccountFunding
		}
		for name, path := range fsmPaths {
			for i := 0; i <= len(path); i++ { // the core read C after i events
				for j := i; j <= len(path); j++ { // the Postgres snapshot P after j events
					_, _, spot, _, spotDelta := effects(path[:i], from, to, amount)
					state, funding, _, fundDelta, _ := effects(path[:j], from, to, amount)
					m := movingTransfer{reqID: "x", asset: usdt, amount: amount, from: from, to: to, state: state, funding: funding}
					what := fmt.Sprintf("%s %s->%s C@%d P@%d", name, from, to, i, j)
					if why := m.check(spot); why != "" {
						t.Errorf("%s: legal execution flagged: %s", what, why)
					}
					if got := m.inFlight(spot).Int64(); fundDelta+spotDelta+got != 0 {
						t.Errorf("%s: funding %+d spot %+d in flight %d: not exact", what, fundDelta, spotDelta, got)
					}
					legal[observation{from, state, funding, spot}] = true
				}
			}
		}
	}
	for _, from := range []model.AccountType{model.AccountFunding, model.AccountSpot} {
		to := model.AccountSpot
		if from == model.AccountSpot {
			to = model.AccountFunding
		}
		for _, st := range transfer.AllStates {
			for _, f := range allSpotOps() {
				for _, s := range allSpotOps() {
					m := movingTransfer{reqID: "x", asset: usdt, amount: amount, from: from, to: to, state: st, funding: f}
					why := m.check(s)
					if want := !legal[observation{from, st, f, s}]; (why != "") != want {
						t.Errorf("%s->%s %s funding %+v spot %+v: check %q, want anomaly %v", from, to, st, f, s, why, want)
					}
				}
			}
		}
	}
}
