package persist

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
)

// P2PArchive reads the transfer history the core forgot (gateway.P2PArchive)
// from p2p_transfers, through the per-user indexes of migration 0090. The
// sink writes that table in seq order; the caller waits for PersistedSeq to
// reach its view's seq before asking, so a page holds each transfer once,
// in its state as of at least that seq.
type P2PArchive struct {
	Pool      *pgxpool.Pool
	Timeout   time.Duration   // per query
	Ready     func() bool     // the migrations are applied (the table exists)
	Persisted func() core.Seq // the sink's persisted seq
}

// PersistedSeq implements gateway.P2PArchive.
func (a *P2PArchive) PersistedSeq() core.Seq { return a.Persisted() }

// p2pHistorySQL is a user's transfers newest first: the newest offset+limit
// as sender and as recipient (one index scan each; a transfer is never to
// its sender, so UNION ALL holds each once), merged, then the page.
const p2pHistorySQL = `SELECT id, from_user_id, to_user_id, amount, asset, status, created_at, execute_at,
	coalesce(completed_at, cancelled_at), failure_reason, updated_at FROM (
	(SELECT * FROM p2p_transfers WHERE from_user_id = $1 ORDER BY id DESC LIMIT $2)
	UNION ALL
	(SELECT * FROM p2p_transfers WHERE to_user_id = $1 ORDER BY id DESC LIMIT $2)) t
	ORDER BY id DESC OFFSET $3 LIMIT $4`

var (
	p2pStatusByName = func() map[string]core.P2PStatus {
		m := map[string]core.P2PStatus{}
		for s := core.P2PPending; s <= core.P2PCancelled; s++ {
			m[s.String()] = s
		}
		return m
	}()
	codeByName = func() map[string]core.Code {
		m := map[string]core.Code{}
		for _, c := range core.Codes() {
			m[c.String()] = c
		}
		return m
	}()
)

// P2PTransfers implements gateway.P2PArchive.
func (a *P2PArchive) P2PTransfers(handle string, offset, limit int, each func(t core.P2PTransfer, from, to string)) error {
	if !a.Ready() {
		return errors.New("the read model is not migrated yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Timeout)
	defer cancel()
	rows, err := a.Pool.Query(ctx, p2pHistorySQL, handle, int64(offset)+int64(limit), offset, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, amount                int64
			asset                     int32
			from, to, status          string
			created, execute, updated time.Time
			done                      *time.Time
			reason                    *string
		)
		if err := rows.Scan(&id, &from, &to, &amount, &asset, &status, &created, &execute, &done, &reason, &updated); err != nil {
			return err
		}
		t := core.P2PTransfer{ID: uint64(id), Asset: core.AssetID(asset), Amount: core.Units(amount),
			Status: p2pStatusByName[status], CreatedAt: created.UnixNano(), ExecuteAt: execute.UnixNano()}
		switch {
		case done != nil:
			t.DoneAt = done.UnixNano()
		case t.Status == core.P2PDebitFailed:
			t.DoneAt = updated.UnixNano() // a failure's time is its row's last update
		}
		if reason != nil {
			t.Reason = codeByName[*reason]
		}
		each(t, from, to)
	}
	return rows.Err()
}
