package persist

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
)

// RecordGap records that the rows of seqs from..to can no longer be derived
// (the WAL holding them was released past the sink's checkpoint,
// --follower-max-retained) and moves the checkpoint past them, in one
// transaction: the range is in sink_gaps, never skipped silently. A
// checkpoint already at or past to is left alone (and nothing recorded).
func RecordGap(ctx context.Context, pool *pgxpool.Pool, from, to core.Seq, reason string) error {
	if to < from {
		return fmt.Errorf("persist: gap %d..%d", from, to)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("persist: record gap: %w", err)
	}
	defer tx.Rollback(ctx)
	tag, err := tx.Exec(ctx, `UPDATE core_checkpoint SET persisted_seq = $1, updated_at = now() WHERE id = 1 AND persisted_seq < $1`,
		int64(to))
	if err != nil {
		return fmt.Errorf("persist: record gap: move the checkpoint: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO sink_gaps (from_seq, to_seq, reason) VALUES ($1, $2, $3)`,
		int64(from), int64(to), reason); err != nil {
		return fmt.Errorf("persist: record gap: %w", err)
	}
	return tx.Commit(ctx)
}
