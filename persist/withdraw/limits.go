package withdraw

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/chaintx"
)

// Withdrawal limits (issue 33 item 6, migration 0085): per user and asset a
// daily amount and count (UTC day, database time), and an optional per-user
// address allowlist. Both are checked in Create's transaction before the
// debit; a refusal rolls the whole withdrawal back (nothing debited).

// Limit is a daily withdrawal limit of one user and asset.
type Limit struct {
	Amount core.Units // exchange units per UTC day; 0 = no limit
	Count  int        // withdrawals per UTC day; 0 = no limit
}

// LimitView is one asset's limit of a user as the admin API shows it.
type LimitView struct {
	Asset      Asset
	Limit      Limit
	Overridden bool       // a per-user row (false: the flag default)
	UsedAmount core.Units // today (UTC), withdrawals not CANCELLED
	UsedCount  int
}

// limitOf is the effective limit of user for asset: its row, else the default.
func (s *Service) limitOf(ctx context.Context, q pgx.Tx, user core.UserID, asset core.AssetID) (Limit, error) {
	var l Limit
	var amount int64
	err := q.QueryRow(ctx, `SELECT daily_amount, daily_count FROM withdrawal_limits WHERE user_id = $1 AND asset_id = $2`,
		int64(user), int32(asset)).Scan(&amount, &l.Count)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.cfg.Limits[asset], nil
	}
	l.Amount = core.Units(amount)
	return l, err
}

// takeQuota adds one withdrawal of amount to today's usage, or refuses
// WITHDRAWAL_LIMIT. One conditional upsert: the usage row's lock makes
// concurrent requests of the user and asset queue, and each sees the
// others' committed usage, so together they cannot pass the limit.
func (s *Service) takeQuota(ctx context.Context, tx pgx.Tx, user core.UserID, asset core.AssetID, amount core.Units) error {
	l, err := s.limitOf(ctx, tx, user, asset)
	if err != nil {
		return err
	}
	if l.Amount > 0 && amount > l.Amount {
		return refuse(CodeWithdrawalLimit, "above the daily withdrawal amount limit")
	}
	var used int64
	err = tx.QueryRow(ctx, `INSERT INTO withdrawal_usage AS u (user_id, asset_id, day, amount, count)
		VALUES ($1, $2, (now() AT TIME ZONE 'UTC')::date, $3, 1)
		ON CONFLICT (user_id, asset_id, day) DO UPDATE SET amount = u.amount + EXCLUDED.amount, count = u.count + 1
		WHERE ($4::bigint = 0 OR u.amount + EXCLUDED.amount <= $4::bigint) AND ($5::int = 0 OR u.count < $5::int)
		RETURNING u.amount`, int64(user), int32(asset), int64(amount), int64(l.Amount), l.Count).Scan(&used)
	if errors.Is(err, pgx.ErrNoRows) {
		return refuse(CodeWithdrawalLimit, "daily withdrawal limit reached (amount %d, count %d per UTC day)", l.Amount, l.Count)
	}
	return err
}

// giveQuota returns a cancelled withdrawal's amount and count to the usage
// of the UTC day it was created on (in the refund's transaction).
func giveQuota(ctx context.Context, tx pgx.Tx, txID chaintx.TxID) error {
	_, err := tx.Exec(ctx, `UPDATE withdrawal_usage u SET amount = GREATEST(u.amount - w.amount, 0), count = GREATEST(u.count - 1, 0)
		FROM withdrawals w WHERE w.tx_id = $1 AND u.user_id = w.user_id AND u.asset_id = w.asset_id
		AND u.day = (w.created_at AT TIME ZONE 'UTC')::date`, int64(txID))
	return err
}

// checkAllowlist refuses ADDRESS_NOT_ALLOWED when the user has an
// allowlist without addr.
func checkAllowlist(ctx context.Context, tx pgx.Tx, user core.UserID, addr chaintx.Address) error {
	var n int64
	var listed bool
	err := tx.QueryRow(ctx, `SELECT count(*), COALESCE(bool_or(address = $2), false) FROM withdrawal_allowlist WHERE user_id = $1`,
		int64(user), string(addr)).Scan(&n, &listed)
	if err == nil && n > 0 && !listed {
		return refuse(CodeAddressNotAllowed, "the address is not on the user's withdrawal allowlist")
	}
	return err
}

// Limits returns the user's limit and today's usage for every withdrawable
// asset, and the user's allowlist (empty: any address).
func (s *Service) Limits(ctx context.Context, user core.UserID) ([]LimitView, []chaintx.Address, error) {
	var out []LimitView
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		for _, a := range s.cfg.Assets {
			l, err := s.limitOf(ctx, tx, user, a.ID)
			if err != nil {
				return err
			}
			var over bool
			var amount int64
			var count int
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM withdrawal_limits WHERE user_id = $1 AND asset_id = $2),
				COALESCE((SELECT amount FROM withdrawal_usage WHERE user_id = $1 AND asset_id = $2 AND day = (now() AT TIME ZONE 'UTC')::date), 0),
				COALESCE((SELECT count FROM withdrawal_usage WHERE user_id = $1 AND asset_id = $2 AND day = (now() AT TIME ZONE 'UTC')::date), 0)`,
				int64(user), int32(a.ID)).Scan(&over, &amount, &count); err != nil {
				return err
			}
			out = append(out, LimitView{Asset: a, Limit: l, Overridden: over, UsedAmount: core.Units(amount), UsedCount: count})
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("withdraw: limits: %w", err)
	}
	rows, err := s.cfg.Pool.Query(ctx, `SELECT address FROM withdrawal_allowlist WHERE user_id = $1 ORDER BY address`, int64(user))
	if err != nil {
		return nil, nil, fmt.Errorf("withdraw: allowlist: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[chaintx.Address])
	return out, list, err
}

// SetLimit stores the user's own limit for an asset (overriding the default).
func (s *Service) SetLimit(ctx context.Context, user core.UserID, asset string, l Limit) error {
	a, ok := s.bySym[asset]
	switch {
	case !ok:
		return refuse(CodeInvalidAsset, "asset %q cannot be withdrawn to a chain", asset)
	case l.Amount < 0 || l.Count < 0:
		return refuse(CodeInvalidAmount, "limits must be >= 0 (0 = no limit)")
	}
	_, err := s.cfg.Pool.Exec(ctx, `INSERT INTO withdrawal_limits (user_id, asset_id, daily_amount, daily_count) VALUES ($1, $2, $3, $4)
		ON CONFLICT (user_id, asset_id) DO UPDATE SET daily_amount = $3, daily_count = $4, updated_at = now()`,
		int64(user), int32(a.ID), int64(l.Amount), l.Count)
	return err
}

// ClearLimit removes the user's own limit for an asset (the default applies).
func (s *Service) ClearLimit(ctx context.Context, user core.UserID, asset string) error {
	a, ok := s.bySym[asset]
	if !ok {
		return refuse(CodeInvalidAsset, "asset %q cannot be withdrawn to a chain", asset)
	}
	_, err := s.cfg.Pool.Exec(ctx, `DELETE FROM withdrawal_limits WHERE user_id = $1 AND asset_id = $2`, int64(user), int32(a.ID))
	return err
}

// AllowAddress adds an address to the user's allowlist (the first one turns it on).
func (s *Service) AllowAddress(ctx context.Context, user core.UserID, address string) (chaintx.Address, error) {
	addr, err := s.cfg.ParseAddress(address)
	if err != nil {
		return "", refuse(CodeInvalidAddress, "%v", err)
	}
	_, err = s.cfg.Pool.Exec(ctx, `INSERT INTO withdrawal_allowlist (user_id, address) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		int64(user), string(addr))
	return addr, err
}

// DisallowAddress removes an address from the user's allowlist (removing
// the last one turns it off: any address).
func (s *Service) DisallowAddress(ctx context.Context, user core.UserID, address string) error {
	addr, err := s.cfg.ParseAddress(address)
	if err != nil {
		return refuse(CodeInvalidAddress, "%v", err)
	}
	_, err = s.cfg.Pool.Exec(ctx, `DELETE FROM withdrawal_allowlist WHERE user_id = $1 AND address = $2`, int64(user), string(addr))
	return err
}
