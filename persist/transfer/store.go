package transfer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// Transfer is one row of transfers_tb.
type Transfer struct {
	ReqID        string // server-generated ULID, the primary key
	TransferID   int64  // numeric id shown by the API
	CID          string // client idempotency key; "" = none
	UserID       UserID
	From, To     model.AccountType
	Asset        AssetID
	Amount       Units // asset units, > 0
	State        State
	RetryCount   int    // adapter calls that ended in an unknown outcome
	ErrorMessage string // last error, for operators
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// ErrNotFound: no transfer with that req_id (or cid).
var ErrNotFound = errors.New("transfer: not found")

// Store is transfers_tb. Every state change goes through Transition, a
// compare-and-set guarded by the transition table.
type Store struct {
	pool *pgxpool.Pool
	b    *Batcher
}

// NewStore returns the Store of b's (migrated) database: Get, Insert,
// Transition and NoteRetry run in b's shared transactions (batch.go); the
// other reads are statements of their own.
func NewStore(b *Batcher) *Store { return &Store{pool: b.pool, b: b} }

const transferCols = `req_id, transfer_id, COALESCE(cid, ''), user_id, from_account, to_account, asset_id,
	amount, state, retry_count, COALESCE(error_message, ''), created_at, updated_at`

// transferColsT is transferCols of the table aliased t, each column under
// its own name (for statements joining transfers_tb with other relations).
const transferColsT = `t.req_id, t.transfer_id, COALESCE(t.cid, '') AS cid, t.user_id, t.from_account, t.to_account,
	t.asset_id, t.amount, t.state, t.retry_count, COALESCE(t.error_message, '') AS error_message, t.created_at, t.updated_at`

func scanTransfer(row pgx.Row) (Transfer, error) {
	var t Transfer
	var from, to string
	var user int64
	var asset int32
	err := row.Scan(&t.ReqID, &t.TransferID, &t.CID, &user, &from, &to, &asset,
		&t.Amount, &t.State, &t.RetryCount, &t.ErrorMessage, &t.CreatedAt, &t.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Transfer{}, ErrNotFound
	}
	t.UserID, t.Asset, t.From, t.To = UserID(user), AssetID(asset), model.AccountType(from), model.AccountType(to)
	return t, err
}

// Insert stores t in state INIT (a fused step with no operation and no
// transition). When t.CID is already used by the same user nothing is
// inserted and the existing transfer is returned with inserted=false (a
// repeated cid never creates a second transfer).
func (s *Store) Insert(ctx context.Context, t Transfer) (got Transfer, inserted bool, err error) {
	if !batchInsertable(t) {
		return Transfer{}, false, fmt.Errorf("transfer: insert %s: not a storable INIT transfer", t.ReqID)
	}
	a := s.b.fused(ctx, t, &fusePlan{insert: &t, at: Init})
	switch {
	case a.err != nil:
		return Transfer{}, false, fmt.Errorf("transfer: insert %s: %w", t.ReqID, a.err)
	case a.inserted:
		return a.transfer, true, nil
	}
	got, err = s.GetByCID(ctx, t.UserID, t.CID) // the cid is taken
	return got, false, err
}

// Get returns the transfer with req_id.
func (s *Store) Get(ctx context.Context, reqID string) (Transfer, error) {
	a := s.b.do(&batchReq{kind: kindGet, ctx: ctx, reqID: reqID})
	return a.transfer, a.err
}

// GetByCID returns the user's transfer with that client id.
func (s *Store) GetByCID(ctx context.Context, user UserID, cid string) (Transfer, error) {
	return scanTransfer(s.pool.QueryRow(ctx,
		`SELECT `+transferCols+` FROM transfers_tb WHERE user_id = $1 AND cid = $2`, int64(user), cid))
}

// Transition moves req_id from `from` to `to` if and only if the pair is in
// the transition table and the row is in `from` right now (compare-and-set).
// won=false means the row was not in `from`: another driver got there first,
// and the caller must re-read instead of acting. errMsg, when not empty,
// becomes error_message.
func (s *Store) Transition(ctx context.Context, reqID string, from, to State, errMsg string) (won bool, err error) {
	_, won, err = s.transition(ctx, reqID, from, to, errMsg)
	return won, err
}

// transition is Transition that also returns, on a win, the row exactly as
// the transition left it (so a driver need not read it again).
func (s *Store) transition(ctx context.Context, reqID string, from, to State, errMsg string) (Transfer, bool, error) {
	if !CanTransition(from, to) {
		return Transfer{}, false, fmt.Errorf("transfer: %s: illegal transition %s -> %s", reqID, from, to)
	}
	a := s.b.do(&batchReq{kind: kindCAS, ctx: ctx, reqID: reqID, from: from, to: to, msg: errMsg})
	if a.err != nil {
		return Transfer{}, false, fmt.Errorf("transfer: %s: CAS %s -> %s: %w", reqID, from, to, a.err)
	}
	return a.transfer, a.won, nil
}

// NoteRetry records an unknown outcome in state `at`: retry_count+1, the
// error message, and updated_at (so the worker's staleness clock restarts).
// Nothing happens if the row has left `at`.
func (s *Store) NoteRetry(ctx context.Context, reqID string, at State, errMsg string) error {
	if a := s.b.do(&batchReq{kind: kindNote, ctx: ctx, reqID: reqID, from: at, msg: errMsg}); a.err != nil {
		return fmt.Errorf("transfer: %s: note retry: %w", reqID, a.err)
	}
	return nil
}

// dbNow is the database's clock (transaction time).
func (s *Store) dbNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("transfer: read the database clock: %w", err)
	}
	return now, nil
}

// unfinishedBefore returns up to limit non-terminal transfers with
// updated_at < cutoff, in (updated_at, req_id) order after the cursor
// `after` (its zero value: from the first).
func (s *Store) unfinishedBefore(ctx context.Context, cutoff time.Time, after Transfer, limit int) ([]Transfer, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+transferCols+` FROM transfers_tb
		WHERE state NOT IN (40, -10, -30) AND updated_at < $1 AND (updated_at, req_id) > ($2, $3)
		ORDER BY updated_at, req_id LIMIT $4`, cutoff, after.UpdatedAt, after.ReqID, limit)
	if err != nil {
		return nil, fmt.Errorf("transfer: interrupted scan: %w", err)
	}
	return collectTransfers(rows, "interrupted scan")
}

// Stale returns up to limit non-terminal transfers not updated for at least
// olderThan (spec 6.2), oldest first.
func (s *Store) Stale(ctx context.Context, olderThan time.Duration, limit int) ([]Transfer, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+transferCols+` FROM transfers_tb
		WHERE state NOT IN (40, -10, -30) AND updated_at <= now() - $1::interval
		ORDER BY updated_at LIMIT $2`, olderThan, limit)
	if err != nil {
		return nil, fmt.Errorf("transfer: stale scan: %w", err)
	}
	return collectTransfers(rows, "stale scan")
}

// collectTransfers scans every row of rows (and closes it).
func collectTransfers(rows pgx.Rows, what string) ([]Transfer, error) {
	defer rows.Close()
	var out []Transfer
	for rows.Next() {
		t, err := scanTransfer(rows)
		if err != nil {
			return nil, fmt.Errorf("transfer: %s: %w", what, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("transfer: %s: %w", what, err)
	}
	return out, nil
}
