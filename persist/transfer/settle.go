package transfer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ubscore/ubscore/persist/noeffect"
)

// This file settles a transfer whose INSERT had an unknown outcome (the
// connection died around the commit): until it is settled the client can
// be told neither "recorded" nor "nothing happened" (issue 20, spec 2.3).

// DefaultSettleWait bounds how long Create keeps trying to settle an
// insert of unknown outcome before answering Result.Unconfirmed.
const DefaultSettleWait = 10 * time.Second

// msgNotRecorded is the error_message of a fenced transfer (see fence);
// FailureCode maps it to SYSTEM_ERROR.
const msgNotRecorded = "create: not recorded (the database did not confirm the insert); nothing moved"

// settleInsert handles the failed insert of t. When the failure proves
// nothing was written (noeffect.Proven: a Postgres ERROR that rolled the
// transaction back, or a request never sent), it is Create's plain
// "nothing recorded" error. Any other failure — a FATAL such as 57P01 on
// the pipelined insert + first move + COMMIT, which may come after the
// COMMIT did commit (issue 41), a broken connection, a timeout — proves
// nothing: it fences t's req_id (Store.fence), retrying for up to
// SettleWait:
//   - fenced: the transfer is FAILED with SYSTEM_ERROR; nothing moved, and
//     the first insert can never land any more;
//   - the req_id exists: the first insert did commit; Create drives the row
//     (known: the caller may not step from it, it is read first);
//   - the cid exists under another req_id: the original, as a duplicate.
//
// If the database does not answer in time, the answer is Unconfirmed.
func (c *Coordinator) settleInsert(ctx context.Context, t Transfer, cause error) (r Result, known bool, err error) {
	if noeffect.Proven(cause) {
		return Result{}, false, fmt.Errorf("%w (nothing recorded)", cause)
	}
	c.log.Warn("transfer: insert outcome unknown; settling its req_id", "req_id", t.ReqID, "err", cause)
	deadline := time.Now().Add(c.cfg.SettleWait)
	backoff := c.cfg.RetryBase
	for {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CallTimeout)
		got, fenced, ferr := c.cfg.Store.fence(fctx, t, msgNotRecorded)
		cancel()
		switch {
		case ferr != nil:
		case fenced:
			c.log.Warn("transfer: fenced an insert of unknown outcome; nothing moved", "req_id", t.ReqID)
			c.stats.Failed.Add(1)
			return Result{Transfer: got}, false, nil
		case got.ReqID == t.ReqID:
			return Result{Transfer: got}, false, nil
		default:
			return Result{Transfer: got, Duplicate: true}, false, nil
		}
		if time.Now().After(deadline) {
			c.log.Warn("transfer: insert outcome still unknown; answering unconfirmed", "req_id", t.ReqID, "err", ferr)
			return Result{Transfer: t, Unconfirmed: true}, false, nil
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			deadline = time.Time{} // the caller left: one more try, then answer
		}
		backoff = min(2*backoff, c.cfg.RetryMax)
	}
}

// fence inserts t with its req_id as FAILED with msg, unless its req_id (or
// the user's cid) is taken. fenced=true: this wrote the row, so the earlier
// insert of the same req_id can never commit (the primary key holds it).
// Otherwise got is the row holding the req_id, or the user's transfer with
// that cid.
func (s *Store) fence(ctx context.Context, t Transfer, msg string) (got Transfer, fenced bool, err error) {
	var cid any
	if t.CID != "" {
		cid = t.CID
	}
	got, err = scanTransfer(s.pool.QueryRow(ctx, `INSERT INTO transfers_tb
		(req_id, cid, user_id, asset_id, amount, transfer_type, source_type, from_account, to_account, state, error_message)
		VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, -10, $9)
		ON CONFLICT DO NOTHING
		RETURNING `+transferCols,
		t.ReqID, cid, int64(t.UserID), int32(t.Asset), int64(t.Amount), transferType(t.From), string(t.From), string(t.To), msg))
	if err == nil {
		return got, true, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Transfer{}, false, err
	}
	if got, err = scanTransfer(s.pool.QueryRow(ctx, `SELECT `+transferCols+` FROM transfers_tb WHERE req_id = $1`, t.ReqID)); !errors.Is(err, ErrNotFound) {
		return got, false, err
	}
	got, err = s.GetByCID(ctx, t.UserID, t.CID)
	return got, false, err
}
