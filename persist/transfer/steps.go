package transfer

import (
	"context"
	"log/slog"
	"strings"
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

// step makes one move of *t. On movedKnown *t is the row as this driver
// left it (from the write itself, no read): the caller may step on from it.
func (c *Coordinator) step(ctx context.Context, t *Transfer) move {
	// A step is not interrupted by its caller going away; it is bounded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CallTimeout)
	defer cancel()
	if handled, m := c.fusedStep(ctx, t); handled {
		return m
	}
	switch t.State {
	case Init:
		if r := c.cas(ctx, t, SourcePending, ""); r != casWon {
			return r.move()
		}
		return c.source(ctx, t)
	case SourcePending:
		return c.source(ctx, t)
	case SourceDone:
		if r := c.cas(ctx, t, TargetPending, ""); r != casWon {
			return r.move()
		}
		return c.target(ctx, t)
	case TargetPending:
		return c.target(ctx, t)
	case Compensating:
		return c.refund(ctx, t)
	}
	return stayed // terminal: nothing to do
}

// source calls the source withdraw for a transfer in SOURCE_PENDING.
func (c *Coordinator) source(ctx context.Context, t *Transfer) move {
	o := call(ctx, c.side(t.From), OpWithdraw, *t)
	switch o.Kind {
	case Success:
		if t.To == AccountFunding && c.fusable(*t) {
			return c.fusedDeposit(ctx, t) // ->SOURCE_DONE ->TARGET_PENDING, deposit, ... in one transaction
		}
		return c.cas(ctx, t, SourceDone, "").move()
	case ExplicitFail:
		r := c.cas(ctx, t, Failed, "source withdraw: "+o.String())
		if r == casWon {
			c.stats.Failed.Add(1)
			c.log.Info("transfer failed at source", "req_id", t.ReqID, "reason", o.Code)
		}
		return r.move()
	}
	c.unknown(ctx, *t, OpWithdraw, o)
	return stayed
}

// target calls the target deposit for a transfer in TARGET_PENDING.
func (c *Coordinator) target(ctx context.Context, t *Transfer) move {
	o := call(ctx, c.side(t.To), OpDeposit, *t)
	switch o.Kind {
	case Success:
		// The atomic commit: both sides succeeded; this CAS makes it final.
		r := c.cas(ctx, t, Committed, "")
		if r == casWon {
			c.stats.Committed.Add(1)
			c.log.Info("transfer committed", "req_id", t.ReqID)
		}
		return r.move()
	case ExplicitFail:
		if !t.From.reversible() {
			c.log.Log(ctx, LevelCritical, "target refused and source is not reversible: retrying forever",
				"req_id", t.ReqID, "outcome", o.String())
			c.note(ctx, *t, "target deposit: "+o.String()+" (source not reversible)")
			return stayed
		}
		if t.From == AccountFunding && c.fusable(*t) {
			return c.fusedCompensate(ctx, t, o) // ->COMPENSATING, refund, ->ROLLED_BACK in one transaction
		}
		return c.cas(ctx, t, Compensating, "target deposit: "+o.String()).move()
	}
	c.unknown(ctx, *t, OpDeposit, o)
	return stayed
}

// refund calls the source refund for a transfer in COMPENSATING. Nothing
// but SUCCESS leaves COMPENSATING: the funds are in flight until it does.
func (c *Coordinator) refund(ctx context.Context, t *Transfer) move {
	o := call(ctx, c.side(t.From), OpRefund, *t)
	if o.Kind == Success {
		r := c.cas(ctx, t, RolledBack, "")
		if r == casWon {
			c.stats.RolledBack.Add(1)
			c.log.Info("transfer rolled back", "req_id", t.ReqID)
		}
		return r.move()
	}
	c.unknown(ctx, *t, OpRefund, o)
	return stayed
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
	return casWon
}

// unknown handles an answer that says nothing certain: stay, count, alert,
// retry later. Never compensate on it (2.3).
func (c *Coordinator) unknown(ctx context.Context, t Transfer, op Op, o Outcome) {
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
