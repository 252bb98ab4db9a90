package persist

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Run feeds the Sink from src until ctx is done or an error retrying cannot
// fix: it takes up to MaxBatch records from src and writes them with
// WriteBatch, retrying the same records with exponential backoff (with
// jitter) until they commit. After a batch short of MaxBatch (the sink has
// caught up) it lets records accumulate until Linger has passed since that
// batch started: Postgres's cost per row falls steeply with the batch size
// (BenchmarkWriteBatchHTTPLike: ~1.6x from 512 to 8192 records), and a sink
// that keeps up would otherwise write many tiny batches. Lag stays within
// about Linger plus one write. A batch is never dropped, so a Postgres outage
// only makes the Sink lag; the Source, which reads the WAL on its own, never
// waits for Postgres. Run returns ctx.Err() when ctx ends, the Source's error
// wrapped, or ErrSeqGap / ErrBadBatch wrapped.
func (s *Sink) Run(ctx context.Context, src Source) error {
	for {
		recs, err := src.Next(ctx, s.opts.MaxBatch)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("persist: source: %w", err)
		}
		start := time.Now()
		full := len(recs) >= s.opts.MaxBatch
		if err := s.writeWithRetry(ctx, recs); err != nil {
			return err
		}
		if !full && s.opts.Linger > 0 {
			if wait := s.opts.Linger - time.Since(start); wait > 0 && !sleep(ctx, wait) {
				return ctx.Err()
			}
		}
	}
}

// writeWithRetry writes recs, retrying until they commit, ctx ends or the
// error is permanent.
func (s *Sink) writeWithRetry(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	delay := s.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, s.opts.AttemptTimeout)
		err := s.WriteBatch(actx, recs)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrSeqGap) || errors.Is(err, ErrBadBatch):
			s.log.Error("persist: batch cannot be written", "first_seq", recs[0].Cmd.Seq,
				"last_seq", recs[len(recs)-1].Cmd.Seq, "err", err)
			return err
		}
		s.retries.Add(1)
		wait := jitter(delay)
		s.log.Warn("persist: batch write failed, retrying", "first_seq", recs[0].Cmd.Seq,
			"last_seq", recs[len(recs)-1].Cmd.Seq, "attempt", attempt, "retry_in", wait, "err", err)
		if !sleep(ctx, wait) {
			return ctx.Err()
		}
		delay = min(2*delay, s.opts.MaxBackoff)
	}
}

// jitter returns a duration uniformly in [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
