package withdraw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/chaintx"
)

// Feed is the completions feed (chaintx.Manager or a chaintx.Store).
type Feed interface {
	Completions(ctx context.Context, after int64, limit int) ([]chaintx.Completion, error)
}

// settleBatch bounds the completions one settle pass applies.
const settleBatch = 500

// SettleOnce applies the completions after the checkpoint to withdrawals,
// each in one transaction with the checkpoint (so each is applied once,
// whoever runs the settler and however often), and returns how many it
// applied.
func (s *Service) SettleOnce(ctx context.Context, feed Feed, log *slog.Logger) (int, error) {
	var after int64
	if err := s.cfg.Pool.QueryRow(ctx, `SELECT last_seq FROM withdrawal_settle_checkpoint`).Scan(&after); err != nil {
		return 0, fmt.Errorf("withdraw: checkpoint: %w", err)
	}
	cs, err := feed.Completions(ctx, after, settleBatch)
	if err != nil {
		return 0, err
	}
	for i, c := range cs {
		if err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error { return s.apply(ctx, tx, c, log) }); err != nil {
			return i, fmt.Errorf("withdraw: settle seq %d: %w", c.Seq, err)
		}
	}
	return len(cs), nil
}

// apply moves the checkpoint from c.Seq-1 to c.Seq (0 rows: another
// settler did it: nothing happens) and applies c to its withdrawal.
func (s *Service) apply(ctx context.Context, tx pgx.Tx, c chaintx.Completion, log *slog.Logger) error {
	tag, err := tx.Exec(ctx, `UPDATE withdrawal_settle_checkpoint SET last_seq = $1 WHERE last_seq = $1 - 1`, c.Seq)
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	if c.Submitter != s.cfg.Submitter || !strings.HasPrefix(c.RequestID, "wd-") {
		return nil // not a withdrawal
	}
	switch c.State {
	case chaintx.Confirmed:
		_, err = tx.Exec(ctx, `UPDATE withdrawals SET state = 'COMPLETED', updated_at = now() WHERE tx_id = $1 AND state = 'PENDING'`, int64(c.TxID))
	case chaintx.FailedFinal:
		var user, amount int64
		var asset int32
		err = tx.QueryRow(ctx, `UPDATE withdrawals SET state = 'CANCELLED', updated_at = now() WHERE tx_id = $1 AND state = 'PENDING'
			RETURNING user_id, asset_id, amount`, int64(c.TxID)).Scan(&user, &asset, &amount)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err == nil {
			// The refund gives the daily quota back. Usage before balance,
			// the order Create locks them in (no deadlock between the two).
			err = giveQuota(ctx, tx, c.TxID)
		}
		if err == nil {
			_, err = tx.Exec(ctx, `UPDATE balances_tb SET available = available + $3, version = version + 1, updated_at = now()
				WHERE user_id = $1 AND asset_id = $2`, user, asset, amount)
			log.Warn("withdraw: cancelled and refunded to FUNDING", "tx_id", c.TxID, "request_id", c.RequestID,
				"user_id", user, "amount", amount, "why", c.SubState)
		}
	case chaintx.Stuck:
		log.Log(ctx, slog.Level(12), "withdraw: withdrawal STUCK on chain: stays PENDING, never refunded automatically",
			"tx_id", c.TxID, "request_id", c.RequestID)
	}
	return err
}

// RunSettler settles every interval until ctx ends.
func (s *Service) RunSettler(ctx context.Context, feed Feed, every time.Duration, log *slog.Logger) {
	chaintx.Every(ctx, every, func() {
		if _, err := s.SettleOnce(ctx, feed, log); err != nil && ctx.Err() == nil {
			log.Warn("withdraw: settle failed (retried)", "err", err)
		}
	})
}
