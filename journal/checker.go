package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/logging"
)

// The periodic full check (spec 004 §6.4): every interval the whole state is
// checked at one exact seq on a replica — never on the processor, whose
// per-command checks stay cheap — and each market with a violation nothing
// halts yet (or the core, for balance-level ones) is halted by a sequenced
// KindBreakerTrip submitted through the ring: journaled, so replay and
// every follower reproduce the halt.

// CheckReplica is the replica the periodic check reads.
type CheckReplica uint8

const (
	// CheckOnView checks the read view's replica under its read lock (the
	// viewer, and so acks and new reads, wait for the check's duration).
	// It adds no work per command: the default (measured: docs/operations.md, "Runtime protection").
	CheckOnView CheckReplica = iota
	// CheckOnFollower checks a WAL follower of its own, which catches up
	// before each check: nothing waits for the check, but every command is
	// applied once more.
	CheckOnFollower
	// CheckOnState checks the state follower's replica (state.go), the one
	// that writes the snapshots: nothing waits for the check, and no
	// replica is added.
	CheckOnState
)

// CheckerConfig configures RunChecker.
type CheckerConfig struct {
	Interval time.Duration // between checks, > 0
	Replica  CheckReplica
	// OnCheck, if set, is called after every check with its duration (the
	// check alone, not the follower's catch-up), the seq checked and the
	// violations nothing halted yet.
	OnCheck func(d time.Duration, seq core.Seq, open []core.Violation)
}

// ErrNoReplica is returned by RunChecker for CheckOnView without a read
// view, and for CheckOnState without a state follower (Config.NoSnapshots).
var ErrNoReplica = errors.New("journal: the periodic check needs a replica")

// RunChecker runs the full check every cfg.Interval until ctx ends (nil)
// or the pipeline stops (ErrStopped).
func (pl *Pipeline) RunChecker(ctx context.Context, cfg CheckerConfig) error {
	if cfg.Interval <= 0 {
		return fmt.Errorf("journal: check interval %v", cfg.Interval)
	}
	check := pl.checkView
	if cfg.Replica == CheckOnState {
		if pl.cfg.NoSnapshots { // no state follower: it would answer ErrStopped, as if the pipeline had stopped
			return ErrNoReplica
		}
		check = pl.checkState
	} else if cfg.Replica == CheckOnFollower {
		f, err := pl.NewFollower(pl.DurableSeq() + 1)
		if err != nil {
			return err
		}
		check = func(ctx context.Context) (core.Seq, []core.Violation, time.Duration, error) {
			return checkFollower(ctx, f, pl.DurableSeq())
		}
	} else if pl.view == nil {
		return ErrNoReplica
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-pl.dead:
			return ErrStopped
		case <-t.C:
		}
		seq, open, d, err := check(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if cfg.OnCheck != nil {
			cfg.OnCheck(d, seq, open)
		}
		if len(open) == 0 {
			continue
		}
		logging.Critical(context.Background(), pl.log, "journal: the periodic full check found invariant violations", "checked_seq", seq,
			"violations", describeViolations(open))
		if err := pl.trip(ctx, core.ReasonNone, "periodic", seq, open); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// checkView runs the full check on the read view at the seq it reflects.
func (pl *Pipeline) checkView(context.Context) (core.Seq, []core.Violation, time.Duration, error) {
	pl.viewMu.RLock()
	defer pl.viewMu.RUnlock()
	t0 := time.Now()
	open, _ := pl.view.UnhaltedViolations()
	return pl.viewSeq, open, time.Since(t0), nil
}

// checkFollower brings f to target, then checks its replica.
func checkFollower(ctx context.Context, f *Follower, target core.Seq) (core.Seq, []core.Violation, time.Duration, error) {
	for f.NextSeq() <= target {
		if _, err := f.Next(ctx, 4096); err != nil {
			return 0, nil, 0, err
		}
	}
	t0 := time.Now()
	open, _ := f.proc.UnhaltedViolations()
	return f.NextSeq() - 1, open, time.Since(t0), nil
}
