// Package spotops bounds the core's record of processed spot operations
// (deposits, withdrawals and refunds by req_id, core.MaxProcessedOps)
// without breaking their idempotency: a req_id is forgotten only once its
// internal transfer is terminal in Postgres.
package spotops

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// The core remembers every spot deposit, withdraw and refund by req_id, so
// a retried operation is answered from its first result; its set is bounded
// (core.MaxProcessedOps). Forgetter keeps it small without breaking that
// idempotency: a req_id is forgotten only by a sequenced KindForgetOps that
// this job submits once the transfer is terminal in Postgres — and has been
// for forgetAfter, far longer than any adapter call in flight can take
// (the SPOT adapter's call timeout), so no retry of its operations can still arrive. Never
// by age alone: a transfer that is not terminal keeps its records however
// old (a refund looks up its withdraw; a retried deposit must not apply
// twice).
//
// It scans transfers_tb in req_id order (ULIDs: creation order, on the
// primary key) from a persisted watermark below which every transfer is
// terminal and forgotten; a transfer still moving holds the watermark but
// not the scan, which continues past it in memory and starts over from the
// watermark once it reaches the end.
type Forgetter struct {
	pool        *pgxpool.Pool
	pl          *journal.Pipeline
	log         *slog.Logger
	forgetAfter time.Duration // a terminal transfer's age before its records go
	batch       int           // transfers read per step
	cursor      string        // where the in-memory scan continues ("" = from the watermark)
}

// Defaults of the job.
const (
	ForgetAfter = time.Hour   // a terminal transfer's age before its records go
	Batch       = 1_000       // transfers read per step
	Every       = time.Minute // the server's period of Run
)

// NewForgetter returns the job with the defaults.
func NewForgetter(pool *pgxpool.Pool, pl *journal.Pipeline, log *slog.Logger) *Forgetter {
	return &Forgetter{pool: pool, pl: pl, log: log, forgetAfter: ForgetAfter, batch: Batch}
}

// Run steps every interval until ctx ends.
func (f *Forgetter) Run(ctx context.Context, every time.Duration) {
	for {
		if n, err := f.Step(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("transfers: forgetting terminal transfers' spot records failed; retrying later", "err", err)
		} else if n > 0 {
			f.log.Info("transfers: the core forgot the spot records of terminal transfers", "transfers", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

var terminalStates = []int16{40, -10, -30} // COMMITTED, FAILED, ROLLED_BACK

// Step reads up to f.batch transfers after the scan position, forgets the
// records of those terminal for forgetAfter (the ones the core still
// holds), and moves the watermark over the leading run of them. It returns
// how many transfers' records it forgot.
func (f *Forgetter) Step(ctx context.Context) (int, error) {
	var wm string
	if err := f.pool.QueryRow(ctx, `SELECT through_req_id FROM spot_ops_forget WHERE id = 1`).Scan(&wm); err != nil {
		return 0, fmt.Errorf("read the watermark: %w", err)
	}
	from := max(f.cursor, wm)
	rows, err := f.pool.Query(ctx, `SELECT req_id, state = ANY($3) AND updated_at < now() - $4::interval
		FROM transfers_tb WHERE req_id > $1 ORDER BY req_id LIMIT $2`,
		from, f.batch, terminalStates, fmt.Sprintf("%d microseconds", f.forgetAfter.Microseconds()))
	if err != nil {
		return 0, fmt.Errorf("scan transfers: %w", err)
	}
	type row struct {
		reqID string
		done  bool
	}
	var list []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.reqID, &r.done); err != nil {
			rows.Close()
			return 0, fmt.Errorf("scan transfers: %w", err)
		}
		list = append(list, r)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("scan transfers: %w", err)
	}
	forgotten, newWM, blocked := 0, wm, from != wm
	for _, r := range list {
		if !r.done {
			blocked = true
			continue
		}
		if did, err := f.forget(ctx, r.reqID); err != nil {
			return forgotten, err
		} else if did {
			forgotten++
		}
		if !blocked {
			newWM = r.reqID
		}
	}
	f.cursor = ""
	if len(list) == f.batch {
		f.cursor = list[len(list)-1].reqID
	}
	if newWM != wm {
		if _, err := f.pool.Exec(ctx, `UPDATE spot_ops_forget SET through_req_id = $1, updated_at = now()
			WHERE id = 1 AND through_req_id < $1`, newWM); err != nil {
			return forgotten, fmt.Errorf("move the watermark: %w", err)
		}
	}
	return forgotten, nil
}

// forget submits a KindForgetOps for reqID if the core still holds a record
// of it, and waits for it to be durable.
func (f *Forgetter) forget(ctx context.Context, reqID string) (bool, error) {
	key, ok := core.KeyFrom(reqID)
	if !ok {
		return false, nil // not a core key: the core never saw it
	}
	held := false
	if err := f.pl.Read(func(p *core.Processor) error {
		for _, k := range [...]core.Kind{core.KindSpotWithdraw, core.KindSpotDeposit, core.KindSpotRefund} {
			if _, ok := p.SpotOp(k, key); ok {
				held = true
			}
		}
		return nil
	}); err != nil || !held {
		return false, err
	}
	c := core.Command{Kind: core.KindForgetOps, Key: key}
	r := journal.NewReply()
	if _, err := f.pl.Submit(&c, r); err != nil {
		return false, err
	}
	if err := f.pl.WaitContext(ctx, r); err != nil {
		return false, err
	}
	if res := r.Result(); res.Code != core.OK {
		return false, fmt.Errorf("forget %s: %v", reqID, res.Code)
	}
	return true, nil
}
