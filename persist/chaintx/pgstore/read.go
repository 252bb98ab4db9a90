package pgstore

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/chaintx"
)

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// txCols are managed_tx's columns in scanTx's order.
const txCols = `tx_id, submitter, COALESCE(request_id, ''), nonce, to_address, value_wei::text, data, gas_limit,
	COALESCE(tx_hash, ''), state, COALESCE(sub_state, ''), submit_attempts, COALESCE(last_error, ''), last_submit_at,
	next_resubmit_at, receipt_hash, COALESCE(receipt_kind, ''), receipt_block, COALESCE(receipt_block_hash, ''),
	COALESCE(receipt_success, false), allocated_at, confirmed_at, fencing_token, created_at, updated_at,
	COALESCE(resubmit_backoff_s, 0)`

func scanTx(rows pgx.CollectableRow) (chaintx.Tx, error) {
	var t chaintx.Tx
	var nonce, rblock *int64
	var rhash *string
	var value, rkind, rbhash string
	var gas int64
	var rsuccess bool
	var backoff float64
	err := rows.Scan(&t.ID, &t.Submitter, &t.RequestID, &nonce, &t.Payload.To, &value, &t.Payload.Data, &gas,
		&t.Hash, &t.State, &t.SubState, &t.SubmitAttempts, &t.LastError, &t.LastSubmitAt,
		&t.NextResubmitAt, &rhash, &rkind, &rblock, &rbhash, &rsuccess, &t.AllocatedAt, &t.ConfirmedAt,
		&t.FencingToken, &t.CreatedAt, &t.UpdatedAt, &backoff)
	if err != nil {
		return t, err
	}
	t.ResubmitBackoff = time.Duration(backoff * float64(time.Second))
	t.Payload.GasLimit = uint64(gas)
	var ok bool
	if t.Payload.Value, ok = new(big.Int).SetString(value, 10); !ok {
		return t, fmt.Errorf("pgstore: value %q", value)
	}
	if nonce != nil {
		n := uint64(*nonce)
		t.Nonce = &n
	}
	if rhash != nil && rblock != nil {
		t.Receipt = &chaintx.Receipt{TxHash: chaintx.Hash(*rhash), Kind: chaintx.SignedKind(rkind),
			BlockNumber: uint64(*rblock), BlockHash: chaintx.Hash(rbhash), Success: rsuccess}
	}
	return t, nil
}

// loadTxs runs a query selecting txCols and attaches each tx's signed transactions.
func loadTxs(ctx context.Context, q querier, sql string, args ...any) ([]chaintx.Tx, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	txs, err := pgx.CollectRows(rows, scanTx)
	if err != nil || len(txs) == 0 {
		return txs, err
	}
	ids := make([]int64, len(txs))
	at := make(map[chaintx.TxID]int, len(txs))
	for i, t := range txs {
		ids[i], at[t.ID] = int64(t.ID), i
	}
	rows, err = q.Query(ctx, `SELECT tx_id, tx_hash, kind, raw, max_fee::text, max_tip::text, created_at
		FROM managed_tx_signed WHERE tx_id = ANY($1) ORDER BY tx_id, created_at, tx_hash`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var sg chaintx.Signed
		var fee, tip string
		if err := rows.Scan(&id, &sg.Hash, &sg.Kind, &sg.Raw, &fee, &tip, &sg.CreatedAt); err != nil {
			return nil, err
		}
		sg.MaxFee, _ = new(big.Int).SetString(fee, 10)
		sg.MaxTip, _ = new(big.Int).SetString(tip, 10)
		t := &txs[at[chaintx.TxID(id)]]
		t.Signed = append(t.Signed, sg)
	}
	return txs, rows.Err()
}

func one(txs []chaintx.Tx, err error) (chaintx.Tx, error) {
	if err != nil {
		return chaintx.Tx{}, fmt.Errorf("pgstore: %w", err)
	}
	if len(txs) == 0 {
		return chaintx.Tx{}, chaintx.ErrNotFound
	}
	return txs[0], nil
}

// Get implements chaintx.Store.
func (s *Store) Get(ctx context.Context, id chaintx.TxID) (chaintx.Tx, error) {
	return one(loadTxs(ctx, s.pool, `SELECT `+txCols+` FROM managed_tx WHERE tx_id = $1`, int64(id)))
}

// GetByRequest implements chaintx.Store.
func (s *Store) GetByRequest(ctx context.Context, sub chaintx.Address, req string) (chaintx.Tx, error) {
	return one(loadTxs(ctx, s.pool, `SELECT `+txCols+` FROM managed_tx WHERE submitter = $1 AND request_id = $2`, string(sub), req))
}

// Completions implements chaintx.Store.
func (s *Store) Completions(ctx context.Context, after int64, limit int) ([]chaintx.Completion, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, tx_id, submitter, COALESCE(request_id, ''), status, COALESCE(sub_state, ''), time
		FROM tx_completions WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: completions: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (chaintx.Completion, error) {
		var c chaintx.Completion
		err := r.Scan(&c.Seq, &c.TxID, &c.Submitter, &c.RequestID, &c.State, &c.SubState, &c.At)
		return c, err
	})
}

// Remediations implements chaintx.Store.
func (s *Store) Remediations(ctx context.Context, id chaintx.TxID) ([]chaintx.Remediation, error) {
	rows, err := s.pool.Query(ctx, `SELECT submitter, tx_id, nonce, action, node_id, fencing_token, reason, tx_hashes, time
		FROM tx_remediations WHERE tx_id = $1 ORDER BY id`, int64(id))
	if err != nil {
		return nil, fmt.Errorf("pgstore: remediations: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (chaintx.Remediation, error) {
		var x chaintx.Remediation
		var hashes []string
		err := r.Scan(&x.Submitter, &x.TxID, &x.Nonce, &x.Action, &x.NodeID, &x.FencingToken, &x.Reason, &hashes, &x.At)
		for _, h := range hashes {
			x.Hashes = append(x.Hashes, chaintx.Hash(h))
		}
		return x, err
	})
}

// Stats implements chaintx.Store.
func (s *Store) Stats(ctx context.Context, sub chaintx.Address) (chaintx.PendingStats, error) {
	var st chaintx.PendingStats
	var oldest *float64
	err := s.pool.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE state IN ('ALLOCATED', 'TRACKING', 'STUCK')),
			count(*) FILTER (WHERE state = 'STUCK'),
			count(*) FILTER (WHERE state = 'CREATED'),
			extract(epoch FROM now() - min(allocated_at) FILTER (WHERE state IN ('ALLOCATED', 'TRACKING', 'STUCK')))::float8
		FROM managed_tx WHERE submitter = $1 AND state NOT IN ('CONFIRMED', 'FAILED_FINAL')`, string(sub)).
		Scan(&st.Pending, &st.Stuck, &st.CreatedWait, &oldest)
	if err != nil {
		return st, fmt.Errorf("pgstore: stats: %w", err)
	}
	if oldest != nil {
		st.OldestAge = time.Duration(*oldest * float64(time.Second))
	}
	return st, nil
}

// NoncesHeld implements chaintx.Store.
func (s *Store) NoncesHeld(ctx context.Context, sub chaintx.Address, from, to uint64) (map[uint64]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT nonce FROM managed_tx WHERE submitter = $1 AND nonce >= $2 AND nonce < $3`,
		string(sub), int64(from), int64(to))
	if err != nil {
		return nil, err
	}
	ns, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	out := make(map[uint64]bool, len(ns))
	for _, n := range ns {
		out[uint64(n)] = true
	}
	return out, err
}

// ReceiptCandidates implements chaintx.Store. A tx without a schedule
// (next_receipt_at NULL: a tx that went STUCK from ALLOCATED before
// MarkStuck scheduled one, issue 41) is due at once: every tx that may
// still be mined is checked.
func (s *Store) ReceiptCandidates(ctx context.Context, sub chaintx.Address, limit int) ([]chaintx.Tx, error) {
	return loadTxs(ctx, s.pool, `SELECT `+txCols+` FROM managed_tx WHERE submitter = $1 AND nonce IS NOT NULL AND confirmed_at IS NULL AND state IN ('TRACKING', 'STUCK')
		AND receipt_hash IS NULL AND (next_receipt_at IS NULL OR next_receipt_at <= now()) ORDER BY next_receipt_at NULLS FIRST LIMIT $2`,
		string(sub), limit)
}

// FinalityCandidates implements chaintx.Store.
func (s *Store) FinalityCandidates(ctx context.Context, sub chaintx.Address, limit int) ([]chaintx.Tx, error) {
	return loadTxs(ctx, s.pool, `SELECT `+txCols+` FROM managed_tx WHERE submitter = $1 AND nonce IS NOT NULL AND confirmed_at IS NULL AND state IN ('TRACKING', 'STUCK')
		AND receipt_hash IS NOT NULL ORDER BY receipt_block, nonce LIMIT $2`, string(sub), limit)
}

// GetByRequests implements chaintx.Store: one query, each ref looked up by
// the (submitter, request_id) index (LATERAL ... LIMIT 1: the plan does not
// depend on statistics).
func (s *Store) GetByRequests(ctx context.Context, refs []chaintx.RequestRef) ([]chaintx.Tx, error) {
	subs, reqs := make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		subs[i], reqs[i] = string(r.Submitter), r.RequestID
	}
	txs, err := loadTxs(ctx, s.pool, `SELECT x.* FROM unnest($1::text[], $2::text[]) AS r(submitter, request_id),
		LATERAL (SELECT `+txCols+` FROM managed_tx m WHERE m.submitter = r.submitter AND m.request_id = r.request_id LIMIT 1) x`,
		subs, reqs)
	if err != nil {
		return nil, fmt.Errorf("pgstore: get by requests: %w", err)
	}
	return txs, nil
}
