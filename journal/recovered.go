package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/logging"
)

// RecoveryReport is what the pipeline's start-up recovery found (metrics,
// health, logs). Immutable once Start returns.
type RecoveryReport struct {
	Seq         core.Seq // the recovered state's seq
	SnapshotSeq core.Seq // the base snapshot (0 = the WAL from seq 1)
	Duration    time.Duration
	MarketCheck map[core.MarketID]time.Duration
	Open        []core.Violation // found and halted at start (RECOVERY_FAILED)
	Contained   []core.Violation // under halts already in force
	Skipped     []string         // newer bases not used, and why
}

// Recovery returns what the start-up recovery found.
func (pl *Pipeline) Recovery() RecoveryReport { return pl.recovery }

// Evictions is how many commands were discarded since start (poison
// commands and failed per-command checks), each with a rebuild of the state.
func (pl *Pipeline) Evictions() uint64 { return pl.evictions.Load() }

// Recoveries is how many times the state was rebuilt since start: the
// start-up recovery plus one per eviction.
func (pl *Pipeline) Recoveries() uint64 { return pl.recoveries.Load() }

// tripRecovered halts, through the ring, every market whose state failed
// verification after recovery, and the core for balance-level damage, with
// reason RECOVERY_FAILED: journaled, so the next recovery replays the halt
// instead of finding the damage open again. Everything else serves.
//
// A standby issues no command (Submit would be refused, and Start failed
// with it: every replicated node starts as a standby): it keeps what it
// found for TripDeferred and follows the primary's commands, whose own
// recovery or periodic check halts the same markets in the same state.
func (pl *Pipeline) tripRecovered(rec *Recovered) error {
	if len(rec.Open) == 0 {
		return nil
	}
	if pl.standby.Load() {
		open := append([]core.Violation(nil), rec.Open...)
		pl.deferredTrips.Store(&open)
		logging.Critical(context.Background(), pl.log, "journal: recovery found invariant violations on a standby: not tripping "+
			"(a standby follows the primary's commands; this node trips what is still open if it becomes the primary)",
			"recovered_seq", rec.Proc.LastSeq(), "violations", describeViolations(rec.Open))
		return nil
	}
	return pl.trip(context.Background(), core.ReasonRecoveryFailed, "recovery", rec.Proc.LastSeq(), rec.Open)
}

// TripDeferred is, on a pipeline started as a standby and promoted since,
// its recovery's breaker trips (reason RECOVERY_FAILED) for what is still
// open: with a read view, the current state is checked again (the old
// primary's trips, applied since, may have halted those markets, or an
// operator resumed one after its repair); without one, the recovery's
// violations are tripped as found (a trip of a halted market changes
// nothing but its reason). Nothing if the recovery found nothing, or once
// it has succeeded. ErrStandby before the promotion. One goroutine.
func (pl *Pipeline) TripDeferred(ctx context.Context) error {
	if pl.standby.Load() {
		return ErrStandby
	}
	p := pl.deferredTrips.Load()
	if p == nil {
		return nil
	}
	open, seq := *p, pl.recovery.Seq
	if pl.view != nil {
		// The view first reaches every command applied so far (those the
		// standby took from the log before its promotion): a market an
		// operator resumed there is not halted again on a lagging view.
		for target := pl.AppliedSeq(); pl.ViewSeq() < target; time.Sleep(time.Millisecond) {
			if err := pl.Err(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		seq, open, _, _ = pl.checkView(ctx)
	}
	if len(open) == 0 {
		pl.log.Info("journal: the violations recovery found on this standby are all halted now", "checked_seq", seq)
	} else if err := pl.trip(ctx, core.ReasonRecoveryFailed, "recovery", seq, open); err != nil {
		return err // kept: the promotion tried again trips what is still open then
	}
	pl.deferredTrips.CompareAndSwap(p, nil)
	return nil
}

// trip submits one KindBreakerTrip per market with open violations (0 =
// the core), reason overriding each violation's own unless ReasonNone, and
// waits until each is applied.
func (pl *Pipeline) trip(ctx context.Context, reason core.BreakerReason, phase string, seq core.Seq, open []core.Violation) error {
	byMarket := map[core.MarketID][]core.Violation{}
	var order []core.MarketID
	for _, v := range open {
		if _, ok := byMarket[v.Market]; !ok {
			order = append(order, v.Market)
		}
		byMarket[v.Market] = append(byMarket[v.Market], v)
	}
	r := NewReply()
	for _, m := range order {
		vs := byMarket[m]
		why := reason
		if why == core.ReasonNone {
			why = vs[0].Reason
			for _, v := range vs { // a negative balance is the most specific balance-level reason
				if v.Reason == core.ReasonNegativeBalance {
					why = v.Reason
				}
			}
		}
		c := core.Command{Kind: core.KindBreakerTrip, Market: m, Flags: uint8(why), Text: BreakerContext(phase, seq, vs)}
		logging.Critical(context.Background(), pl.log, "journal: tripping the circuit breaker", "market", m, "reason", why.String(), "phase", phase,
			"checked_seq", seq, "violations", describeViolations(vs))
		if _, err := pl.Submit(&c, r); err != nil {
			return fmt.Errorf("journal: breaker trip for market %d: %w", m, err)
		}
		if err := pl.WaitContext(ctx, r); err != nil {
			return fmt.Errorf("journal: breaker trip for market %d: %w", m, err)
		}
		if res := r.Result(); res.Code != core.OK {
			return fmt.Errorf("journal: breaker trip for market %d refused: %v", m, res.Code)
		}
	}
	return nil
}

// BreakerContext is a breaker trip's context JSON (Command.Text): the phase
// that found the violations (recovery, periodic), the seq of the state
// checked and the violations, as many as fit core.MaxTextLen.
func BreakerContext(phase string, seq core.Seq, vs []core.Violation) string {
	type violJSON struct {
		Market core.MarketID `json:"market,omitempty"`
		Asset  core.AssetID  `json:"asset,omitempty"`
		Detail string        `json:"detail"`
	}
	ctx := struct {
		Phase      string     `json:"phase"`
		CheckedSeq core.Seq   `json:"checked_seq"`
		Count      int        `json:"violations_total"`
		Violations []violJSON `json:"violations"`
	}{Phase: phase, CheckedSeq: seq, Count: len(vs)}
	for n := len(vs); n >= 0; n-- {
		ctx.Violations = ctx.Violations[:0]
		for _, v := range vs[:n] {
			ctx.Violations = append(ctx.Violations, violJSON{Market: v.Market, Asset: v.Asset, Detail: core.ViolName(v.Detail)})
		}
		b, _ := json.Marshal(ctx) // plain values always marshal
		if len(b) <= core.MaxTextLen {
			return string(b)
		}
	}
	return ""
}
