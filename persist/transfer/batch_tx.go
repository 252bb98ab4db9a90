package transfer

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/noeffect"
)

// One batch is one READ COMMITTED transaction of one or two round trips:
//
//	1. BEGIN; the Store's requests (batch_store.go); then, if the batch
//	   has FUNDING operations, lock their balance rows (in key order) and
//	   read their records, the withdraw records of refunds, and which
//	   users exist (fused steps lock their transfers first); else COMMIT.
//	2. (FUNDING operations or fused steps only) insert the new records and
//	   apply the balance changes they imply; the transitions of the fused
//	   steps and the transfers inserted directly in the state their first
//	   step ends in (batch_fused.go); COMMIT.
//
// The decisions between 1 and 2 are made in memory, in arrival order, by
// decideOp, the adapter's one decision (batch_funding.go). COMMIT
// travels in the same pipeline as the statements before it: if any of
// them fails, Postgres skips the rest of the pipeline, COMMIT included,
// and the transaction rolls back.

// batchWriter runs batches on a connection of its own.
type batchWriter struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	stats   *BatchStats
	faults  FaultSource   // nil: none (Batcher.SetFaults)
	conn    *pgxpool.Conn // nil before the first batch and after a failed one
}

func (w *batchWriter) release() {
	if w.conn != nil {
		w.conn.Release() // pgxpool discards a connection left broken or inside a transaction
		w.conn = nil
	}
}

// run executes batch and answers each of its requests exactly once.
func (w *batchWriter) run(batch []*batchReq) {
	live := make([]*batchReq, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- batchAnswer{err: err} // its caller has left: it is never run
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ans := make([]batchAnswer, len(live))
	err := w.attempt(live, ans)
	if err != nil && len(live) > 1 && statementFailed(err) {
		// One request's statement failed the transaction, which rolled back
		// with no effect: run each request alone, so that the failing one
		// (a refusing trigger, a row Postgres rejects) fails only itself,
		// as it would in a batch of its own, instead of every
		// transfer that happened to share its batch.
		w.stats.Isolated.Add(1)
		for i, r := range live {
			one := ans[i : i+1]
			if err := w.attempt([]*batchReq{r}, one); err != nil {
				one[0] = batchAnswer{err: err}
			}
			r.done <- one[0]
		}
		return
	}
	for i, r := range live {
		if err != nil {
			ans[i] = batchAnswer{err: err}
		}
		r.done <- ans[i]
	}
}

// attempt runs reqs as one transaction, again (up to batchAttempts times in
// all) while it rolls back with no effect for a reason running it again can
// cure, and counts the outcome.
func (w *batchWriter) attempt(reqs []*batchReq, ans []batchAnswer) error {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	var err error
	for attempt := 1; ; attempt++ {
		var again bool
		again, err = w.exec(ctx, reqs, ans)
		if err == nil || !again || attempt == batchAttempts {
			break
		}
		w.stats.Retries.Add(1)
	}
	if err != nil {
		w.stats.Failed.Add(1)
	} else {
		w.stats.Batches.Add(1)
		w.stats.Requests.Add(int64(len(reqs)))
	}
	return err
}

// exec runs reqs as one transaction, filling ans. On an error nothing of
// ans may be used; again reports that the transaction certainly rolled
// back with no effect and may simply run again.
func (w *batchWriter) exec(ctx context.Context, reqs []*batchReq, ans []batchAnswer) (again bool, err error) {
	if w.conn == nil {
		if w.conn, err = w.pool.Acquire(ctx); err != nil {
			return false, err
		}
	}
	defer func() {
		if err != nil {
			w.release() // pgxpool closes it if it is still inside the transaction
		}
	}()
	clear(ans)
	fb := newFundingBatch(reqs)

	var rt1 pgx.Batch
	rt1.BeginTx(pgx.TxOptions{})
	queueStore(&rt1, reqs, ans)
	fused := queueFusedLocks(&rt1, reqs, ans)
	fb.queueReads(&rt1)
	oneTrip := len(fb.idx) == 0 && !fused
	if oneTrip {
		queueDirect(&rt1, reqs, ans) // none of them has an operation to decide
		rt1.Queue("COMMIT")
	}
	if err := w.conn.SendBatch(ctx, &rt1).Close(); err != nil {
		return retryable(err), err
	}
	if oneTrip {
		return false, nil
	}

	drawn := fb.decide(ans, w.faults)
	if err := crashBefore(w.faults, drawn); err != nil {
		return false, err
	}

	var rt2 pgx.Batch
	fb.queueWrite(&rt2)
	queueFusedCAS(&rt2, reqs, ans)
	queueDirect(&rt2, reqs, ans) // all of the batch's, in one statement
	rt2.Queue("COMMIT")
	if err := w.conn.SendBatch(ctx, &rt2).Close(); err != nil {
		return retryable(err), err
	}
	afterCommit(w.faults, drawn, ans)
	return false, nil
}

// statementFailed reports an error a statement of the batch raised — a
// data or integrity error, a PL/pgSQL RAISE (a trigger refusing a row), a
// rejected statement, a deadlock — after which Postgres skipped the rest of
// the pipeline, COMMIT included: the transaction rolled back with no
// effect. It is the one rule of package noeffect (severity ERROR only: a
// FATAL proves nothing); connection, resource and server errors are an
// unknown outcome and are not included.
func statementFailed(err error) bool { return noeffect.RolledBack(err) }

// retryable reports an error after which the transaction rolled back as
// a whole and running it again is correct and may succeed. None of these
// can come from COMMIT itself (READ COMMITTED, no deferred constraints):
// an error of COMMIT is an unknown outcome and is never retried.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !noeffect.RolledBack(err) || !errors.As(err, &pgErr) {
		return false
	}
	switch {
	case pgErr.Code == "40P01", pgErr.Code == "40001": // deadlock_detected, serialization_failure
		return true
	case pgErr.Code == "22P02" && strings.Contains(pgErr.Message, racedMark):
		// writeSQL's guard: a record this batch decided was inserted first
		// by another transaction (a concurrent first call outside the
		// batch). Run again, the batch reads that record.
		return true
	}
	return false
}
