package transfer

import (
	"context"
	"log/slog"
	"strings"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// This file is spec 9.2's step(): one move of one transfer. Every state
// change is a CAS; the state announcing a call (SOURCE_PENDING,
// TARGET_PENDING, COMPENSATING) is durable before the call is made
// (persist-before-call); only EXPLICIT_FAIL moves backwards (2.3).

// A move is what one step did.
type move uint8

const (
	stayed     move = iota // no progress: an unknown outcome or an error; wait, re-read and retry
	moved                  // the state changed (another driver's lost CAS, or nothing known of the row): re-read
	movedKnown             // this driver's last write changed it, and the step's *t is the row exactly as committed
)

// step makes one move of *t: the step of its state in the FSM's program
// (fsm.go). On movedKnown *t is the row as this driver left it (from the
// write itself, no read): the caller may step on from it.
func (c *Coordinator) step(ctx context.Context, t *Transfer) move {
	// A step is not interrupted by its caller going away; it is bounded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CallTimeout)
	defer cancel()
	st, found := StepAt(t.State, t.From.Reversible())
	if !found {
		return stayed // terminal: nothing to do
	}
	return c.run(ctx, t, st, nil)
}

// run makes step st of *t. carry is what an earlier call's outcome left to
// write first (its chain up to st.At), in the same transaction as st's
// FUNDING call when st calls FUNDING, else by CAS before st's call.
func (c *Coordinator) run(ctx context.Context, t *Transfer, st Step, carry []fuseCAS) move {
	pre := append(carry, chainCAS(st.Pre, "", false)...)
	if st.Side(t.From, t.To) == model.AccountFunding {
		// The transitions, the call and its outcome's transitions: ONE transaction.
		return c.runFused(ctx, t, &fusePlan{at: t.State, pre: pre, op: st.Op,
			ok: chainCAS(st.OK, "", false), fail: chainCAS(st.Fail, st.FailMsg, true)})
	}
	for _, p := range pre { // persist-before-call
		if r := c.cas(ctx, t, p.to, p.msg); r != casWon {
			return r.move()
		}
	}
	o := call(ctx, c.cfg.Spot, st.Op, *t)
	if !st.Moves(o.Kind) {
		c.unknown(ctx, *t, st.Op, o)
		return stayed
	}
	then := chainCAS(st.OK, "", false)
	if o.Kind == model.ExplicitFail {
		then = chainCAS(st.Fail, st.FailMsg+o.String(), false)
	}
	end := then[len(then)-1].to
	if next, found := StepAt(end, t.From.Reversible()); found && next.Side(t.From, t.To) == model.AccountFunding {
		// The outcome is written with the next (FUNDING) call, in its
		// transaction; should that fail, this call is repeated
		// (idempotent: it answers its first outcome). A fresh bound.
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CallTimeout)
		defer cancel()
		return c.run(nctx, t, next, then)
	}
	for _, p := range then {
		if r := c.cas(ctx, t, p.to, p.msg); r != casWon {
			return r.move()
		}
	}
	c.reached(*t, o)
	return movedKnown
}

// chainCAS is the transitions to states, the first with error_message msg
// (followed by the call's outcome when outcome is set).
func chainCAS(states []State, msg string, outcome bool) []fuseCAS {
	out := make([]fuseCAS, len(states))
	for i, s := range states {
		out[i].to = s
		if i == 0 {
			out[i].msg, out[i].outcome = msg, outcome
		}
	}
	return out
}

// reached counts and logs a transfer that reached a terminal state.
func (c *Coordinator) reached(t Transfer, o model.Outcome) {
	switch t.State {
	case Failed:
		c.stats.Failed.Add(1)
		c.log.Info("transfer failed at source", "req_id", t.ReqID, "reason", o.Code)
	case Committed:
		c.stats.Committed.Add(1)
		c.log.Info("transfer committed", "req_id", t.ReqID)
	case RolledBack:
		c.stats.RolledBack.Add(1)
		c.log.Info("transfer rolled back", "req_id", t.ReqID)
	}
}

type casResult uint8

const (
	casWon  casResult = iota // this driver moved the transfer
	casLost                  // another driver moved it first: do not act on the old state
	casErr                   // the database did not answer: retry later
)

// move is the step's result when its last write was this CAS.
func (r casResult) move() move {
	switch r {
	case casWon:
		return movedKnown
	case casLost:
		return moved
	}
	return stayed
}

// cas moves t to `to`; on a win *t becomes the row as the CAS left it.
func (c *Coordinator) cas(ctx context.Context, t *Transfer, to State, errMsg string) casResult {
	row, won, err := c.cfg.Store.transition(ctx, t.ReqID, t.State, to, errMsg)
	switch {
	case err != nil:
		c.log.Error("transfer CAS failed", "req_id", t.ReqID, "from", t.State, "to", to, "err", err)
		return casErr
	case !won:
		c.stats.CASLost.Add(1)
		return casLost
	}
	c.stats.CASWon.Add(1)
	*t = row
	if c.cfg.OnCommit != nil {
		c.cfg.OnCommit(row)
	}
	return casWon
}

// unknown handles an answer that says nothing certain: stay, count, alert,
// retry later. Never compensate on it (2.3).
func (c *Coordinator) unknown(ctx context.Context, t Transfer, op model.Op, o model.Outcome) {
	c.stats.Unknown.Add(1)
	msg := string(op) + ": " + o.String()
	if t.State == Compensating {
		c.stats.RefundFailures.Add(1)
		if t.RetryCount >= 2 { // MON-002: the 3rd failure and on
			c.stats.MON002.Add(1)
			msg = errorf("compensation failed %d times: %s", t.RetryCount+1, msg)
		}
		// Keep the refusal that started the compensation (the transfer's
		// failure code once ROLLED_BACK) in front of the retry note.
		if reason, _, _ := strings.Cut(t.ErrorMessage, "; "); strings.Contains(reason, "EXPLICIT_FAIL(") {
			msg = reason + "; " + msg
		}
	}
	c.log.Log(ctx, LevelCritical, "transfer outcome unknown: staying and retrying forever",
		slog.String("req_id", t.ReqID), slog.String("state", t.State.String()), slog.String("outcome", msg))
	c.note(ctx, t, msg)
}

func (c *Coordinator) note(ctx context.Context, t Transfer, msg string) {
	if err := c.cfg.Store.NoteRetry(ctx, t.ReqID, t.State, msg); err != nil {
		c.log.Error("transfer note retry failed", "req_id", t.ReqID, "err", err)
	}
}
