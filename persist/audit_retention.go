package persist

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Audit retention (spec 004 4.4): wal_events rows older than the retention
// are deleted in small batches by a background job, so no statement holds
// locks or bloats a transaction for long. Only the audit table: the WAL,
// the ledger and every other table are untouched.

// Defaults of the audit retention job.
const (
	DefaultAuditRetention = 720 * time.Hour // 30 days
	AuditDeleteBatch      = 5_000           // rows per DELETE
	auditPause            = 50 * time.Millisecond
)

// PruneAudit deletes wal_events rows whose time is before cutoff, at most
// batch rows per statement (with a short pause between statements), until
// none is left or ctx ends. It returns how many rows it deleted.
func PruneAudit(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = AuditDeleteBatch
	}
	var total int64
	for {
		tag, err := pool.Exec(ctx, `DELETE FROM wal_events WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM wal_events WHERE time < $1 LIMIT $2))`, cutoff.UTC(), batch)
		if err != nil {
			return total, fmt.Errorf("persist: prune wal_events: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(auditPause):
		}
	}
}

// RunAuditRetention prunes wal_events older than retention every interval
// until ctx ends, logging what it deleted; errors are logged and retried at
// the next interval.
func RunAuditRetention(ctx context.Context, pool *pgxpool.Pool, retention, interval time.Duration, log *slog.Logger) {
	for {
		n, err := PruneAudit(ctx, pool, time.Now().Add(-retention), AuditDeleteBatch)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("persist: audit retention failed; retrying later", "err", err)
		case n > 0:
			log.Info("persist: audit retention deleted old wal_events rows", "rows", n, "retention", retention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}
