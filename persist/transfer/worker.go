package transfer

import (
	"context"
	"time"
)

// Worker defaults (spec 6.2: stale after 1 minute).
const (
	DefaultStaleAfter = time.Minute
	DefaultBatch      = 100
)

// WorkerConfig tunes a Worker.
type WorkerConfig struct {
	StaleAfter time.Duration // resume transfers not updated for this long (default 1m)
	Interval   time.Duration // time between scans (default StaleAfter/2)
	Batch      int           // transfers resumed per scan at most (default 100)
}

// Worker is the recovery worker (spec 6). At start it resumes every
// non-terminal transfer last updated before it started, whatever its age:
// the process that drove them is gone (a crash or a restart), so waiting for
// them to go stale would only delay them and raise MON-001 alerts for
// transfers nobody is stuck on. Then, every Interval, it resumes every
// non-terminal transfer whose updated_at is older than StaleAfter. It steps
// each transfer while it makes progress. It may run in several processes at
// once: the CAS lets one driver win each state change.
type Worker struct {
	c   *Coordinator
	cfg WorkerConfig
}

// NewWorker returns a Worker driving transfers through c.
func NewWorker(c *Coordinator, cfg WorkerConfig) *Worker {
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.Interval <= 0 {
		cfg.Interval = cfg.StaleAfter / 2
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	return &Worker{c: c, cfg: cfg}
}

// Run resumes the transfers a previous process left (RunInterrupted,
// retried until it has run once) and then scans every Interval until ctx
// is done.
func (w *Worker) Run(ctx context.Context) error {
	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	started := false
	for {
		var err error
		if !started {
			_, err = w.RunInterrupted(ctx)
			started = err == nil
		} else {
			_, err = w.RunOnce(ctx)
		}
		if err != nil && ctx.Err() == nil {
			w.c.log.Error("transfer worker scan failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// RunInterrupted resumes every non-terminal transfer last updated before
// the call (by the database's clock), oldest first, in batches of Batch,
// and returns how many it found. These are the transfers of a process that
// is gone; they are resumed at once (no staleness filter) and, not being
// stuck on anything yet, raise no MON-001 alert. Transfers created while it
// runs are left to their own drivers.
func (w *Worker) RunInterrupted(ctx context.Context) (int, error) {
	cutoff, err := w.c.cfg.Store.dbNow(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	var after Transfer // keyset cursor: (updated_at, req_id) of the last one seen
	for ctx.Err() == nil {
		ts, err := w.c.cfg.Store.unfinishedBefore(ctx, cutoff, after, w.cfg.Batch)
		if err != nil {
			return n, err
		}
		for _, t := range ts {
			if ctx.Err() != nil {
				break
			}
			w.c.log.Info("resuming a transfer interrupted by a restart", "req_id", t.ReqID, "state", t.State.String(),
				"updated_at", t.UpdatedAt)
			if _, err := w.c.advance(ctx, t.ReqID); err != nil {
				w.c.log.Error("transfer worker resume failed", "req_id", t.ReqID, "err", err)
			}
		}
		n += len(ts)
		if len(ts) < w.cfg.Batch {
			break
		}
		after = ts[len(ts)-1]
	}
	return n, ctx.Err()
}

// RunOnce resumes one batch of stale transfers and returns how many it
// found. Transfers still not terminal afterwards wait for a later scan.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	stale, err := w.c.cfg.Store.Stale(ctx, w.cfg.StaleAfter, w.cfg.Batch)
	if err != nil {
		return 0, err
	}
	for _, t := range stale {
		if ctx.Err() != nil {
			break
		}
		if t.State == TargetPending || t.State == Compensating { // MON-001
			w.c.stats.Stuck.Add(1)
			w.c.log.Log(ctx, LevelCritical, "transfer stuck with funds in flight",
				"req_id", t.ReqID, "state", t.State.String(), "since", t.UpdatedAt, "retries", t.RetryCount)
		}
		if _, err := w.c.advance(ctx, t.ReqID); err != nil {
			w.c.log.Error("transfer worker resume failed", "req_id", t.ReqID, "err", err)
		}
	}
	return len(stale), nil
}
