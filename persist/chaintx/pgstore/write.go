package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/chaintx"
)

// The fenced writes of chaintx.Store. Each one is a transaction that
// passes fence first; a statement's WHERE also names the state it moves
// from, so a repeat changes nothing.

// Allocate implements chaintx.Store: one writer batch, one transaction.
func (s *Store) Allocate(ctx context.Context, gs []chaintx.AllocGroup) ([]chaintx.AllocResult, error) {
	leases := make([]chaintx.Lease, len(gs))
	for i, g := range gs {
		leases[i] = g.Lease
	}
	out := make([]chaintx.AllocResult, len(gs))
	err := s.fencedMany(ctx, leases, func(tx pgx.Tx, ok []bool) error {
		for i, g := range gs {
			if !ok[i] {
				out[i] = chaintx.AllocResult{Err: chaintx.ErrFenced}
				continue
			}
			var err error
			if out[i], err = allocateGroup(ctx, tx, g); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: allocate: %w", err)
	}
	return out, nil
}

// allocateGroup is one submitter's part of Allocate, in its transaction:
// one round trip reads what the group needs (request_ids that exist, CREATED
// rows, the cursor, locked, fresh tx ids and the time), assign sets nonces
// and signs, one more writes everything.
func allocateGroup(ctx context.Context, tx pgx.Tx, g chaintx.AllocGroup) (chaintx.AllocResult, error) {
	l, reqs := g.Lease, g.Reqs
	res := chaintx.AllocResult{Answers: make([]chaintx.Tx, len(reqs)), Existing: make([]bool, len(reqs))}
	var reqIDs []string
	for _, r := range reqs {
		if r.RequestID != "" {
			reqIDs = append(reqIDs, r.RequestID)
		}
	}
	if len(reqs) == 0 { // a nudge: only CREATED rows, and nothing at all to write when there are none
		n, err := countCreated(ctx, tx, l.Submitter)
		if err != nil || n == 0 {
			return res, err
		}
	}
	b := &pgx.Batch{}
	// Second idempotency check, inside the batch (spec §3.10): a request_id
	// that exists, or repeats an earlier request of this batch, uses no nonce.
	b.Queue(`SELECT `+txCols+` FROM managed_tx WHERE submitter = $1 AND request_id = ANY($2)`, string(l.Submitter), reqIDs)
	b.Queue(`SELECT `+txCols+` FROM managed_tx WHERE submitter = $1 AND state = 'CREATED'
		ORDER BY tx_id LIMIT $2 FOR UPDATE SKIP LOCKED`, string(l.Submitter), g.MaxCreated)
	// The cursor row, locked (created first if new, so two writers of a new
	// submitter serialize on it too; the nonce's unique index is the last guard).
	b.Queue(`INSERT INTO submitter_nonce_cursor (submitter, next_nonce, fencing_token) VALUES ($1, 0, $2)
		ON CONFLICT (submitter) DO UPDATE SET submitter = excluded.submitter RETURNING next_nonce`, string(l.Submitter), l.Token)
	b.Queue(`SELECT now(), array(SELECT nextval('managed_tx_tx_id_seq') FROM generate_series(1, $1))`, len(reqs))
	br := tx.SendBatch(ctx, b)
	var existing, created []chaintx.Tx
	var dbNext int64
	var now time.Time
	var ids []int64
	err := func() error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if existing, err = pgx.CollectRows(rows, scanTx); err != nil {
			return err
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		if created, err = pgx.CollectRows(rows, scanTx); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&dbNext); err != nil {
			return err
		}
		return br.QueryRow().Scan(&now, &ids)
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, err
	}
	byReq := map[string]chaintx.Tx{}
	if len(existing) > 0 { // with their signed txs (a repeat's answer shows them)
		idsOf := make([]int64, len(existing))
		for i, t := range existing {
			idsOf[i] = int64(t.ID)
		}
		if existing, err = loadTxs(ctx, tx, `SELECT `+txCols+` FROM managed_tx WHERE tx_id = ANY($1)`, idsOf); err != nil {
			return res, err
		}
		for _, t := range existing {
			byReq[t.RequestID] = t
		}
	}
	var fresh []chaintx.Tx // new requests, in order
	firstOf := map[string]int{}
	newIdx := make([]int, len(reqs)) // index into fresh, or -1
	for i, r := range reqs {
		newIdx[i] = -1
		if t, ok := byReq[r.RequestID]; ok && r.RequestID != "" {
			res.Answers[i], res.Existing[i] = t, true
			continue
		}
		if j, ok := firstOf[r.RequestID]; ok && r.RequestID != "" {
			newIdx[i], res.Existing[i] = j, true
			continue
		}
		if r.RequestID != "" {
			firstOf[r.RequestID] = len(fresh)
		}
		newIdx[i] = len(fresh)
		fresh = append(fresh, chaintx.Tx{ID: chaintx.TxID(ids[len(fresh)]), Submitter: r.Submitter, RequestID: r.RequestID, Payload: r.Payload})
	}
	if len(created)+len(fresh) == 0 {
		return res, nil
	}
	all := make([]*chaintx.Tx, 0, len(created)+len(fresh))
	for i := range created {
		all = append(all, &created[i])
	}
	for i := range fresh {
		all = append(all, &fresh[i])
	}
	next, err := g.Assign(uint64(dbNext), all)
	if err != nil {
		return res, err
	}
	if err := writeAllocated(ctx, tx, l, created, fresh, next, now); err != nil {
		return res, err
	}
	for i := range reqs {
		if newIdx[i] >= 0 {
			res.Answers[i] = fresh[newIdx[i]]
		}
	}
	res.Allocated = append(created, fresh...)
	res.Next = next
	return res, nil
}

func countCreated(ctx context.Context, tx pgx.Tx, sub chaintx.Address) (int, error) {
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM managed_tx WHERE submitter = $1 AND state = 'CREATED' LIMIT 1) x`,
		string(sub)).Scan(&n)
	return n, err
}

// writeAllocated writes one group's rows (fresh ones with their ids set),
// signed raws and cursor in one round trip, and sets their states and times
// (now: the transaction's now()).
func writeAllocated(ctx context.Context, tx pgx.Tx, l chaintx.Lease, created, fresh []chaintx.Tx, next uint64, now time.Time) error {
	b := &pgx.Batch{}
	var sIDs []int64
	var sHash, sKind, sFee, sTip []string
	var sRaw [][]byte
	for i := range created {
		t := &created[i]
		b.Queue(`UPDATE managed_tx SET nonce = $2, tx_hash = $3, state = 'ALLOCATED', allocated_at = now(),
			next_resubmit_at = now() + make_interval(secs => $4), fencing_token = $5, updated_at = now()
			WHERE tx_id = $1 AND state = 'CREATED'`, int64(t.ID), int64(*t.Nonce), string(t.Hash),
			chaintx.AllocatedGrace.Seconds(), l.Token)
	}
	if len(fresh) > 0 {
		n := len(fresh)
		ids, nonces, gas := make([]int64, n), make([]int64, n), make([]int64, n)
		reqs := make([]*string, n)
		to, vals, hashes := make([]string, n), make([]string, n), make([]string, n)
		datas := make([][]byte, n)
		for i, t := range fresh {
			ids[i], nonces[i], gas[i] = int64(t.ID), int64(*t.Nonce), int64(t.Payload.GasLimit)
			reqs[i], to[i], vals[i], hashes[i], datas[i] = nullStr(t.RequestID), string(t.Payload.To), numeric(t.Payload.Value), string(t.Hash), data(t.Payload.Data)
		}
		b.Queue(`INSERT INTO managed_tx (tx_id, submitter, request_id, nonce, to_address, value_wei, data, gas_limit,
				tx_hash, state, allocated_at, next_resubmit_at, fencing_token)
			SELECT u.id, $1, u.req, u.nonce, u.to_addr, u.val::numeric, u.data, u.gas, u.hash, 'ALLOCATED', now(),
				now() + make_interval(secs => $10), $11
			FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::bytea[], $8::bigint[], $9::text[])
				AS u(id, req, nonce, to_addr, val, data, gas, hash)`,
			string(l.Submitter), ids, reqs, nonces, to, vals, datas, gas, hashes, chaintx.AllocatedGrace.Seconds(), l.Token)
	}
	for _, set := range [][]chaintx.Tx{created, fresh} {
		for i := range set {
			t := &set[i]
			t.State, t.FencingToken, t.AllocatedAt, t.UpdatedAt = chaintx.Allocated, l.Token, &now, now
			if t.CreatedAt.IsZero() {
				t.CreatedAt = now
			}
			sg := t.Signed[0]
			sIDs, sHash, sKind, sFee, sTip = append(sIDs, int64(t.ID)), append(sHash, string(sg.Hash)),
				append(sKind, string(sg.Kind)), append(sFee, numeric(sg.MaxFee)), append(sTip, numeric(sg.MaxTip))
			sRaw = append(sRaw, sg.Raw)
		}
	}
	b.Queue(`INSERT INTO managed_tx_signed (tx_id, tx_hash, kind, raw, max_fee, max_tip)
		SELECT u.id, u.hash, u.kind, u.raw, u.fee::numeric, u.tip::numeric
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::text[]) AS u(id, hash, kind, raw, fee, tip)`,
		sIDs, sHash, sKind, sRaw, sFee, sTip)
	b.Queue(`INSERT INTO submitter_nonce_cursor (submitter, next_nonce, fencing_token) VALUES ($1, $2, $3)
		ON CONFLICT (submitter) DO UPDATE SET next_nonce = excluded.next_nonce, fencing_token = excluded.fencing_token,
			updated_at = now()`, string(l.Submitter), int64(next), l.Token)
	br := tx.SendBatch(ctx, b)
	for i := range created {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		if tag.RowsAffected() != 1 {
			br.Close()
			return fmt.Errorf("CREATED tx %d changed under its row lock", created[i].ID)
		}
	}
	return br.Close()
}

// Submitted implements chaintx.Store.
func (s *Store) Submitted(ctx context.Context, gs []chaintx.SubmitGroup, after time.Duration) ([]error, error) {
	leases := make([]chaintx.Lease, len(gs))
	for i, g := range gs {
		leases[i] = g.Lease
	}
	errs := make([]error, len(gs))
	err := s.fencedMany(ctx, leases, func(tx pgx.Tx, ok []bool) error {
		for i, g := range gs {
			if !ok[i] {
				errs[i] = chaintx.ErrFenced
				continue
			}
			if err := submitted(ctx, tx, g.Lease, g.Results, after); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: submitted: %w", err)
	}
	return errs, nil
}

func submitted(ctx context.Context, tx pgx.Tx, l chaintx.Lease, rs []chaintx.SubmitResult, after time.Duration) error {
	if len(rs) == 0 {
		return nil
	}
	ids, errs := make([]int64, len(rs)), make([]string, len(rs))
	for i, r := range rs {
		ids[i], errs[i] = int64(r.ID), r.Err
	}
	_, err := tx.Exec(ctx, `UPDATE managed_tx m SET
			state = CASE WHEN u.err = '' AND m.state = 'ALLOCATED' THEN 'TRACKING' ELSE m.state END,
			next_receipt_at = CASE WHEN u.err = '' AND m.state = 'ALLOCATED' THEN now() ELSE m.next_receipt_at END,
			submit_attempts = m.submit_attempts + 1, last_submit_at = now(),
			last_error = NULLIF(u.err, ''), next_resubmit_at = now() + make_interval(secs => $4),
			fencing_token = $3, updated_at = now()
		FROM unnest($1::bigint[], $2::text[]) AS u(id, err)
		WHERE m.tx_id = u.id AND m.submitter = $5 AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK')`,
		ids, errs, l.Token, after.Seconds(), string(l.Submitter))
	return err
}

// ClaimResubmit implements chaintx.Store.
func (s *Store) ClaimResubmit(ctx context.Context, l chaintx.Lease, interval time.Duration, limit int) ([]chaintx.Tx, error) {
	var txs []chaintx.Tx
	err := s.fenced(ctx, l, func(tx pgx.Tx) error {
		var err error
		txs, err = loadTxs(ctx, tx, `UPDATE managed_tx SET next_resubmit_at = now() + make_interval(secs => $3),
				last_submit_at = now(), fencing_token = $4, updated_at = now()
			WHERE tx_id IN (SELECT tx_id FROM managed_tx WHERE submitter = $1 AND state IN ('ALLOCATED', 'TRACKING', 'STUCK')
				AND receipt_hash IS NULL AND next_resubmit_at <= now() ORDER BY nonce LIMIT $2 FOR UPDATE)
			RETURNING `+txCols, string(l.Submitter), limit, interval.Seconds(), l.Token)
		return err
	})
	sortByNonce(txs)
	return txs, err
}

// RecordReceipts implements chaintx.Store.
func (s *Store) RecordReceipts(ctx context.Context, l chaintx.Lease, us []chaintx.ReceiptUpdate) error {
	if len(us) == 0 {
		return nil
	}
	n := len(us)
	ids, blocks, retry := make([]int64, n), make([]*int64, n), make([]float64, n)
	hashes, kinds, bhashes, errs := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	succ := make([]*bool, n)
	for i, u := range us {
		ids[i], retry[i], errs[i] = int64(u.ID), u.Retry.Seconds(), nullStr(u.Err)
		if r := u.Receipt; r != nil {
			bn, ok := int64(r.BlockNumber), r.Success
			blocks[i], hashes[i], kinds[i], bhashes[i], succ[i] = &bn, nullStr(string(r.TxHash)), nullStr(string(r.Kind)), nullStr(string(r.BlockHash)), &ok
		}
	}
	return s.fenced(ctx, l, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE managed_tx m SET receipt_hash = u.hash, receipt_kind = u.kind, receipt_block = u.block,
				receipt_block_hash = u.bhash, receipt_success = u.ok,
				sub_state = CASE WHEN u.hash IS NULL THEN m.sub_state ELSE NULL END,
				next_receipt_at = CASE WHEN u.hash IS NULL THEN now() + make_interval(secs => u.retry) END,
				last_error = COALESCE(u.err, m.last_error), fencing_token = $9, updated_at = now()
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bool[], $7::float8[], $8::text[])
				AS u(id, hash, kind, block, bhash, ok, retry, err)
			WHERE m.tx_id = u.id AND m.submitter = $10 AND m.state IN ('TRACKING', 'STUCK') AND m.receipt_hash IS NULL`,
			ids, hashes, kinds, blocks, bhashes, succ, retry, errs, l.Token, string(l.Submitter))
		return err
	})
}

// Finalize implements chaintx.Store.
func (s *Store) Finalize(ctx context.Context, l chaintx.Lease, id chaintx.TxID, st chaintx.State, sub string) error {
	if !st.Final() {
		return fmt.Errorf("pgstore: finalize to %s", st)
	}
	return s.fenced(ctx, l, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE managed_tx SET state = $2, sub_state = $3, confirmed_at = now(), next_receipt_at = NULL,
				next_resubmit_at = NULL, fencing_token = $4, updated_at = now()
			WHERE tx_id = $1 AND submitter = $5 AND state IN ('TRACKING', 'STUCK') AND receipt_hash IS NOT NULL`,
			int64(id), string(st), nullStr(sub), l.Token, string(l.Submitter))
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return appendCompletions(ctx, tx, []int64{int64(id)})
	})
}

// appendCompletions appends the current state of each tx to the feed with
// the next dense seqs (the counter row's lock orders the commits).
func appendCompletions(ctx context.Context, tx pgx.Tx, ids []int64) error {
	var last int64
	if err := tx.QueryRow(ctx, `UPDATE tx_completion_seq SET last = last + $1 RETURNING last`, len(ids)).Scan(&last); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO tx_completions (seq, tx_id, submitter, request_id, status, sub_state)
		SELECT $2 + u.ord, m.tx_id, m.submitter, m.request_id, m.state, m.sub_state
		FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, ord) JOIN managed_tx m ON m.tx_id = u.id`,
		ids, last-int64(len(ids)))
	return err
}

// Reorged implements chaintx.Store.
func (s *Store) Reorged(ctx context.Context, l chaintx.Lease, id chaintx.TxID, blockHash chaintx.Hash) error {
	return s.fenced(ctx, l, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE managed_tx SET receipt_hash = NULL, receipt_kind = NULL, receipt_block = NULL,
				receipt_block_hash = NULL, receipt_success = NULL, sub_state = 'REORGED', state = 'TRACKING',
				next_receipt_at = now(), next_resubmit_at = now(), fencing_token = $3, updated_at = now()
			WHERE tx_id = $1 AND submitter = $4 AND receipt_block_hash = $2 AND state IN ('TRACKING', 'STUCK')`,
			int64(id), string(blockHash), l.Token, string(l.Submitter))
		return err
	})
}

// MarkStuck implements chaintx.Store.
func (s *Store) MarkStuck(ctx context.Context, l chaintx.Lease, after time.Duration, limit int) ([]chaintx.Tx, error) {
	var txs []chaintx.Tx
	err := s.fenced(ctx, l, func(tx pgx.Tx) error {
		var err error
		txs, err = loadTxs(ctx, tx, `UPDATE managed_tx SET state = 'STUCK', fencing_token = $4, updated_at = now()
			WHERE tx_id IN (SELECT tx_id FROM managed_tx WHERE submitter = $1 AND state IN ('ALLOCATED', 'TRACKING')
				AND receipt_hash IS NULL AND allocated_at < now() - make_interval(secs => $3) ORDER BY nonce LIMIT $2 FOR UPDATE)
			RETURNING `+txCols, string(l.Submitter), limit, after.Seconds(), l.Token)
		if err != nil || len(txs) == 0 {
			return err
		}
		sortByNonce(txs)
		ids := make([]int64, len(txs))
		for i, t := range txs {
			ids[i] = int64(t.ID)
		}
		return appendCompletions(ctx, tx, ids)
	})
	return txs, err
}

// AddSigned implements chaintx.Store.
func (s *Store) AddSigned(ctx context.Context, l chaintx.Lease, id chaintx.TxID, sg chaintx.Signed, r chaintx.Remediation) error {
	return s.fenced(ctx, l, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE managed_tx SET fencing_token = $2, updated_at = now(),
				next_resubmit_at = now() + make_interval(secs => $4)
			WHERE tx_id = $1 AND submitter = $3 AND state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND receipt_hash IS NULL`,
			int64(id), l.Token, string(l.Submitter), chaintx.AllocatedGrace.Seconds())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return chaintx.ErrTxMined // final or mined meanwhile: nothing to replace
		}
		if _, err := tx.Exec(ctx, `INSERT INTO managed_tx_signed (tx_id, tx_hash, kind, raw, max_fee, max_tip)
			VALUES ($1, $2, $3, $4, $5, $6)`, int64(id), string(sg.Hash), string(sg.Kind), sg.Raw, numeric(sg.MaxFee), numeric(sg.MaxTip)); err != nil {
			return err
		}
		return audit(ctx, tx, r)
	})
}

// Audit implements chaintx.Store.
func (s *Store) Audit(ctx context.Context, l chaintx.Lease, r chaintx.Remediation) error {
	return s.fenced(ctx, l, func(tx pgx.Tx) error { return audit(ctx, tx, r) })
}

func audit(ctx context.Context, tx pgx.Tx, r chaintx.Remediation) error {
	hashes := make([]string, len(r.Hashes))
	for i, h := range r.Hashes {
		hashes[i] = string(h)
	}
	_, err := tx.Exec(ctx, `INSERT INTO tx_remediations (submitter, tx_id, nonce, action, node_id, fencing_token, reason, tx_hashes)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, string(r.Submitter), int64(r.TxID), int64(r.Nonce), string(r.Action),
		r.NodeID, r.FencingToken, r.Reason, hashes)
	return err
}

// InsertPlaceholder implements chaintx.Store.
func (s *Store) InsertPlaceholder(ctx context.Context, l chaintx.Lease, t chaintx.Tx, r chaintx.Remediation) (chaintx.Tx, error) {
	var out chaintx.Tx
	err := s.fenced(ctx, l, func(tx pgx.Tx) error {
		old, err := loadTxs(ctx, tx, `SELECT `+txCols+` FROM managed_tx WHERE submitter = $1 AND (request_id = $2 OR nonce = $3)`,
			string(l.Submitter), t.RequestID, int64(*t.Nonce))
		if err != nil {
			return err
		}
		if len(old) > 0 {
			out = old[0]
			return nil
		}
		var cursor, id int64
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT next_nonce, now(), nextval('managed_tx_tx_id_seq') FROM submitter_nonce_cursor
			WHERE submitter = $1 FOR UPDATE`, string(l.Submitter)).Scan(&cursor, &now, &id); err != nil {
			return err
		}
		if int64(*t.Nonce) >= cursor {
			return fmt.Errorf("placeholder nonce %d is not below the cursor %d", *t.Nonce, cursor)
		}
		t.ID = chaintx.TxID(id)
		if err := writeAllocated(ctx, tx, l, nil, []chaintx.Tx{t}, uint64(cursor), now); err != nil {
			return err
		}
		got, err := loadTxs(ctx, tx, `SELECT `+txCols+` FROM managed_tx WHERE submitter = $1 AND nonce = $2`,
			string(l.Submitter), int64(*t.Nonce))
		if err != nil || len(got) != 1 {
			return fmt.Errorf("placeholder read back: %v", err)
		}
		out = got[0]
		r.Reason = fmt.Sprintf("%s (placeholder tx %d in nonce %d)", r.Reason, out.ID, *t.Nonce)
		return audit(ctx, tx, r)
	})
	if err != nil {
		return chaintx.Tx{}, fmt.Errorf("pgstore: placeholder: %w", err)
	}
	return out, nil
}

func sortByNonce(txs []chaintx.Tx) {
	for i := 1; i < len(txs); i++ {
		for j := i; j > 0 && *txs[j].Nonce < *txs[j-1].Nonce; j-- {
			txs[j], txs[j-1] = txs[j-1], txs[j]
		}
	}
}
