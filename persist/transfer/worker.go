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

// Worker is the recovery worker (spec 6): at start and then every Interval
// it resumes every non-terminal transfer whose updated_at is older than
// StaleAfter, stepping each while it makes progress. It may run in several
// processes at once: the CAS lets one driver win each state change.
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

// Run scans at once and then every Interval until ctx is done.
func (w *Worker) Run(ctx context.Context) error {
	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	for {
		if _, err := w.RunOnce(ctx); err != nil && ctx.Err() == nil {
			w.c.log.Error("transfer worker scan failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
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
