package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ubscore/ubscore/persist/chaintx"
)

// The fenced writes of chaintx.Store. Each one is a transaction that
// passes fence first; a statement's WHERE also names the state it moves
// from, so a repeat changes nothing.

// Allocate implements chaintx.Store: one writer batch, one transaction.
// When every group comes with a guess (the writer's nonce cache known, the
// requests signed ahead), ONE round trip: allocateGuessed. Otherwise, or
// when a guess's expectation fails (then after a ROLLBACK of the guessed
// transaction, which wrote nothing), the regular path: two round trips
// whatever the number of groups (submitters) in it: BEGIN, the fence and
// every read in one pipeline; signing (each group's Assign); every write,
// its checks and COMMIT in one more (plus one for repeated request_ids,
// and one for a submitter's very first allocation). Lookups go by index
// from the arrays (LATERAL ... LIMIT), so plans do not depend on
// statistics.
func (s *Store) Allocate(ctx context.Context, gs []chaintx.AllocGroup) ([]chaintx.AllocResult, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: allocate: %w", err)
	}
	defer c.Release()
	out, err := allocate(ctx, c.Conn(), gs)
	if err != nil {
		// The transaction may be open or aborted: end it (a connection
		// that cannot is closed, and the pool drops it).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, rerr := c.Exec(rctx, "ROLLBACK"); rerr != nil {
			_ = c.Conn().Close(rctx)
		}
		return nil, fmt.Errorf("pgstore: allocate: %w", err)
	}
	return out, nil
}

// dbConn is a connection or a transaction.
type dbConn interface {
	querier
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func allocate(ctx context.Context, c *pgx.Conn, gs []chaintx.AllocGroup) ([]chaintx.AllocResult, error) {
	if guessed(gs) {
		out, err := allocateGuessed(ctx, c, gs)
		if !guessMissed(err) {
			return out, err
		}
		// An expectation did not hold: the transaction is aborted, nothing
		// of it was written. End it; the regular path decides.
		if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
			return nil, err
		}
	}
	out := make([]chaintx.AllocResult, len(gs))
	rd, err := allocReads(ctx, c, gs)
	if err != nil {
		return nil, err
	}
	var ws []groupWrite
	for i, g := range gs {
		if !rd.ok[i] {
			out[i] = chaintx.AllocResult{Err: chaintx.ErrFenced}
			continue
		}
		var w *groupWrite
		if out[i], w, err = allocateGroup(ctx, c, g, rd); err != nil {
			return nil, err
		}
		if w != nil {
			ws = append(ws, *w)
		}
	}
	return out, writeAllocated(ctx, c, ws, rd.now, true)
}

// guessed reports whether every group of a batch comes with a guess (and
// requests), each submitter once: then allocateGuessed may run it.
func guessed(gs []chaintx.AllocGroup) bool {
	subs := make(map[chaintx.Address]bool, len(gs))
	for _, g := range gs {
		if g.Guess == nil || len(g.Reqs) == 0 || len(g.Guess.Txs) != len(g.Reqs) || g.Lease.Node == "" || subs[g.Lease.Submitter] {
			return false
		}
		subs[g.Lease.Submitter] = true
	}
	return len(gs) > 0
}

// guessMissed reports whether err is allocateGuessed's way of saying an
// expectation did not hold: a failed check (the 1 / 0 of a check: fence,
// cursor, CREATED rows) or a unique violation (a request_id that exists).
// The transaction is then aborted and has written nothing.
func guessMissed(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "22012" || pe.Code == "23505")
}

// allocateGuessed is Allocate in ONE round trip, for a batch whose groups
// all come with a writer's guess (chaintx.AllocGuess: requests signed
// ahead from the nonce cache): BEGIN, the checks, the writes and COMMIT in
// one pipeline, with generic plans (plan_cache_mode, this transaction only). The checks come first and abort the transaction if any
// expectation fails (guessMissed), so that nothing is written: every
// lease passes the fence (locked FOR SHARE, as in the regular path); every
// cursor exists and is at most the guess's Next (locked FOR UPDATE, in
// submitter order); no submitter has a CREATED row; then the inserts,
// where the unique index on (submitter, request_id) is the in-batch
// idempotency check (an existing request_id aborts before any nonce is
// used, and the regular path answers it); the cursor write checks its rows
// as the regular path's does.
func allocateGuessed(ctx context.Context, c *pgx.Conn, gs []chaintx.AllocGroup) ([]chaintx.AllocResult, error) {
	leases := make([]chaintx.Lease, len(gs))
	curSubs := make([]string, len(gs))
	curGuess, curNext, curToks := make([]int64, len(gs)), make([]int64, len(gs)), make([]int64, len(gs))
	var subs, reqs, to, vals, hashes, kinds, fees, tips []string
	var nonces, gas, toks []int64
	var datas, raws [][]byte
	for i, g := range gs {
		l := g.Lease
		leases[i] = l
		curSubs[i], curGuess[i], curToks[i] = string(l.Submitter), int64(g.Guess.Next), l.Token
		curNext[i] = int64(g.Guess.Next) + int64(len(g.Guess.Txs))
		for _, t := range g.Guess.Txs {
			if t.Nonce == nil || len(t.Signed) == 0 {
				return nil, fmt.Errorf("guess of %s: a tx is not signed", l.Submitter)
			}
			sg := t.Signed[0]
			subs, reqs, nonces = append(subs, string(l.Submitter)), append(reqs, t.RequestID), append(nonces, int64(*t.Nonce))
			to, vals, datas, gas = append(to, string(t.Payload.To)), append(vals, numeric(t.Payload.Value)), append(datas, data(t.Payload.Data)), append(gas, int64(t.Payload.GasLimit))
			hashes, toks, raws, kinds = append(hashes, string(t.Hash)), append(toks, l.Token), append(raws, sg.Raw), append(kinds, string(sg.Kind))
			fees, tips = append(fees, numeric(sg.MaxFee)), append(tips, numeric(sg.MaxTip))
		}
	}
	ls, ln, lt := leaseArrays(leases)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// Generic plans: the statements below look rows up by primary key from
	// the arrays whatever their length, and re-planning them for every
	// batch (custom plans) cost more Postgres CPU than executing them.
	b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
	b.Queue(`SELECT 1 / (count(*) = $4)::int FROM (`+fenceSQL+`) f`, ls, ln, lt, len(gs))
	b.Queue(`SELECT 1 / COALESCE(count(*) = cardinality($1::text[]) AND bool_and(x.next_nonce <= x.guess AND NOT x.created), false)::int
		FROM (SELECT c.next_nonce, u.guess, EXISTS (SELECT 1 FROM managed_tx m WHERE m.submitter = c.submitter AND m.nonce IS NULL
				AND m.state = 'CREATED') AS created
			FROM submitter_nonce_cursor c JOIN unnest($1::text[], $2::bigint[]) AS u(submitter, guess) ON c.submitter = u.submitter
			ORDER BY c.submitter FOR UPDATE OF c) x`, curSubs, curGuess)
	b.Queue(`WITH ins AS (INSERT INTO managed_tx (submitter, request_id, nonce, to_address, value_wei, data, gas_limit,
				tx_hash, state, allocated_at, next_resubmit_at, fencing_token)
			SELECT u.submitter, NULLIF(u.req, ''), u.nonce, u.to_addr, u.val::numeric, u.data, u.gas, u.hash, 'ALLOCATED', now(),
				now() + make_interval(secs => $10), u.token
			FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::bytea[], $7::bigint[], $8::text[], $9::bigint[])
				AS u(submitter, req, nonce, to_addr, val, data, gas, hash, token)
			RETURNING tx_id, submitter, nonce),
		sg AS (INSERT INTO managed_tx_signed (tx_id, tx_hash, kind, raw, max_fee, max_tip)
			SELECT ins.tx_id, u.hash, u.kind, u.raw, u.fee::numeric, u.tip::numeric
			FROM ins JOIN unnest($1::text[], $3::bigint[], $8::text[], $11::text[], $12::bytea[], $13::text[], $14::text[])
				AS u(submitter, nonce, hash, kind, raw, fee, tip) ON u.submitter = ins.submitter AND u.nonce = ins.nonce)
		SELECT ins.tx_id, ins.submitter, ins.nonce, now() FROM ins`,
		subs, reqs, nonces, to, vals, datas, gas, hashes, toks, chaintx.AllocatedGrace.Seconds(), kinds, raws, fees, tips)
	b.Queue(`WITH w AS (UPDATE submitter_nonce_cursor c SET next_nonce = u.next, fencing_token = u.token, updated_at = now()
			FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS u(submitter, next, token) WHERE c.submitter = u.submitter
			RETURNING 1)
		SELECT 1 / (count(*) = cardinality($1::text[]))::int FROM w`, curSubs, curNext, curToks)
	b.Queue("COMMIT")
	type key struct {
		s string
		n int64
	}
	ids := make(map[key]int64, len(subs))
	var now time.Time
	br := c.SendBatch(ctx, b)
	err := func() error {
		for range 4 { // BEGIN, SET, the checks
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var k key
			var id int64
			if err := rows.Scan(&id, &k.s, &k.n, &now); err != nil {
				rows.Close()
				return err
			}
			ids[k] = id
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if len(ids) != len(subs) {
		return nil, fmt.Errorf("guessed allocation committed %d of %d rows", len(ids), len(subs)) // cannot happen: the nonces are unique
	}
	out := make([]chaintx.AllocResult, len(gs))
	for i, g := range gs {
		l := g.Lease
		txs := slices.Clone(g.Guess.Txs)
		for j := range txs {
			t := &txs[j]
			t.ID = chaintx.TxID(ids[key{string(l.Submitter), int64(*t.Nonce)}])
			t.State, t.FencingToken, t.AllocatedAt, t.UpdatedAt, t.CreatedAt = chaintx.Allocated, l.Token, &now, now, now
		}
		out[i] = chaintx.AllocResult{Answers: slices.Clone(txs), Existing: make([]bool, len(txs)), Allocated: txs,
			Next: g.Guess.Next + uint64(len(txs))}
	}
	return out, nil
}

// allocRead is what one pipeline read for a whole writer batch.
type allocRead struct {
	ok       []bool                           // per group: passed the fence
	existing map[reqKey]chaintx.TxID          // (submitter, request_id) -> the tx that has it
	created  map[chaintx.Address][]chaintx.Tx // CREATED rows locked for the batch, tx_id order
	cursor   map[chaintx.Address]int64        // next_nonce, locked; absent: no row yet
	ids      []int64                          // fresh tx ids, one per request of the batch
	now      time.Time                        // the transaction's now()
	full     map[chaintx.TxID]chaintx.Tx      // the existing txs, with their signed ones
}

// allocReads opens the transaction (BEGIN, in the pipeline) and reads.
func allocReads(ctx context.Context, tx dbConn, gs []chaintx.AllocGroup) (*allocRead, error) {
	leases := make([]chaintx.Lease, len(gs))
	var rSubs, rIDs, cSubs, subs []string
	var cLims []int32
	nreq := 0
	for i, g := range gs {
		leases[i] = g.Lease
		subs = append(subs, string(g.Lease.Submitter))
		for _, r := range g.Reqs {
			if r.RequestID != "" {
				rSubs, rIDs = append(rSubs, string(g.Lease.Submitter)), append(rIDs, r.RequestID)
			}
		}
		if g.MaxCreated > 0 {
			cSubs, cLims = append(cSubs, string(g.Lease.Submitter)), append(cLims, int32(g.MaxCreated))
		}
		nreq += len(g.Reqs)
	}
	ls, ln, lt := leaseArrays(leases)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(fenceSQL, ls, ln, lt)
	// Second idempotency check, inside the batch (spec §3.10): a request_id
	// that exists uses no nonce.
	b.Queue(`SELECT r.submitter, r.request_id, x.tx_id FROM unnest($1::text[], $2::text[]) AS r(submitter, request_id),
		LATERAL (SELECT tx_id FROM managed_tx m WHERE m.submitter = r.submitter AND m.request_id = r.request_id LIMIT 1) x`, rSubs, rIDs)
	b.Queue(`SELECT x.* FROM unnest($1::text[], $2::int[]) AS g(submitter, lim),
		LATERAL (SELECT `+txCols+` FROM managed_tx m WHERE m.submitter = g.submitter AND m.nonce IS NULL AND m.state = 'CREATED'
			ORDER BY m.tx_id LIMIT g.lim FOR UPDATE SKIP LOCKED) x`, cSubs, cLims)
	// The cursor rows, locked in submitter order (a new submitter has none
	// yet: allocateGroup creates it; the nonce's unique index is the last guard).
	b.Queue(`SELECT submitter, next_nonce FROM submitter_nonce_cursor WHERE submitter = ANY($1) ORDER BY submitter FOR UPDATE`, subs)
	b.Queue(`SELECT now(), array(SELECT nextval('managed_tx_tx_id_seq') FROM generate_series(1, $1))`, nreq)
	rd := &allocRead{existing: map[reqKey]chaintx.TxID{}, created: map[chaintx.Address][]chaintx.Tx{},
		cursor: map[chaintx.Address]int64{}, full: map[chaintx.TxID]chaintx.Tx{}}
	br := tx.SendBatch(ctx, b)
	err := func() error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		passed, err := passedLeases(rows)
		if err != nil {
			return err
		}
		rd.ok = make([]bool, len(gs))
		for i, l := range leases {
			rd.ok[i] = passed[leaseKey{string(l.Submitter), l.Token}] && l.Node != ""
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		for rows.Next() {
			var sub, req string
			var id int64
			if err := rows.Scan(&sub, &req, &id); err != nil {
				rows.Close()
				return err
			}
			rd.existing[reqKey{chaintx.Address(sub), req}] = chaintx.TxID(id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		created, err := pgx.CollectRows(rows, scanTx)
		if err != nil {
			return err
		}
		for _, t := range created {
			rd.created[t.Submitter] = append(rd.created[t.Submitter], t)
		}
		for _, ts := range rd.created {
			sortByID(ts)
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		for rows.Next() {
			var sub string
			var next int64
			if err := rows.Scan(&sub, &next); err != nil {
				rows.Close()
				return err
			}
			rd.cursor[chaintx.Address(sub)] = next
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return br.QueryRow().Scan(&rd.now, &rd.ids)
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil || len(rd.existing) == 0 {
		return rd, err
	}
	// The txs that existing request_ids name, with their signed txs (a
	// repeat's answer shows them): one more round trip, only for repeats.
	ids := make([]int64, 0, len(rd.existing))
	for _, id := range rd.existing {
		ids = append(ids, int64(id))
	}
	full, err := loadTxs(ctx, tx, `SELECT `+txCols+` FROM managed_tx WHERE tx_id = ANY($1)`, ids)
	for _, t := range full {
		rd.full[t.ID] = t
	}
	return rd, err
}

// reqKey is (submitter, request_id).
type reqKey struct {
	s   chaintx.Address
	req string
}

// groupWrite is what one group of a batch writes.
type groupWrite struct {
	l              chaintx.Lease
	created, fresh []chaintx.Tx
	next           uint64
}

// allocateGroup is one submitter's part of Allocate, after the reads: the
// answers for repeated request_ids, nonces and signatures (g.Assign) for
// the rest and the CREATED rows, and what to write (nil: nothing).
func allocateGroup(ctx context.Context, tx dbConn, g chaintx.AllocGroup, rd *allocRead) (chaintx.AllocResult, *groupWrite, error) {
	l, reqs := g.Lease, g.Reqs
	res := chaintx.AllocResult{Answers: make([]chaintx.Tx, len(reqs)), Existing: make([]bool, len(reqs))}
	created := rd.created[l.Submitter]
	var fresh []chaintx.Tx // new requests, in order
	firstOf := map[string]int{}
	newIdx := make([]int, len(reqs)) // index into fresh, or -1
	for i, r := range reqs {
		newIdx[i] = -1
		if id, ok := rd.existing[reqKey{l.Submitter, r.RequestID}]; ok && r.RequestID != "" {
			res.Answers[i], res.Existing[i] = rd.full[id], true
			continue
		}
		// A repeat of an earlier request of this batch answers that one.
		if j, ok := firstOf[r.RequestID]; ok && r.RequestID != "" {
			newIdx[i], res.Existing[i] = j, true
			continue
		}
		if r.RequestID != "" {
			firstOf[r.RequestID] = len(fresh)
		}
		newIdx[i] = len(fresh)
		fresh = append(fresh, chaintx.Tx{ID: chaintx.TxID(rd.ids[0]), Submitter: r.Submitter, RequestID: r.RequestID, Payload: r.Payload})
		rd.ids = rd.ids[1:]
	}
	if len(created)+len(fresh) == 0 {
		return res, nil, nil
	}
	dbNext, ok := rd.cursor[l.Submitter]
	if !ok { // the submitter's first allocation: create the cursor row (locked)
		if err := tx.QueryRow(ctx, `INSERT INTO submitter_nonce_cursor (submitter, next_nonce, fencing_token) VALUES ($1, 0, $2)
			ON CONFLICT (submitter) DO UPDATE SET submitter = excluded.submitter RETURNING next_nonce`,
			string(l.Submitter), l.Token).Scan(&dbNext); err != nil {
			return res, nil, err
		}
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
		return res, nil, err
	}
	for _, set := range [][]chaintx.Tx{created, fresh} {
		for i := range set {
			t := &set[i]
			t.State, t.FencingToken, t.AllocatedAt, t.UpdatedAt = chaintx.Allocated, l.Token, &rd.now, rd.now
			if t.CreatedAt.IsZero() {
				t.CreatedAt = rd.now
			}
		}
	}
	for i := range reqs {
		if newIdx[i] >= 0 {
			res.Answers[i] = fresh[newIdx[i]]
		}
	}
	res.Allocated = append(created, fresh...)
	res.Next = next
	return res, &groupWrite{l: l, created: created, fresh: fresh, next: next}, nil
}

func sortByID(txs []chaintx.Tx) {
	slices.SortFunc(txs, func(a, b chaintx.Tx) int { return cmp.Compare(a.ID, b.ID) })
}

// writeAllocated writes every group's rows (fresh ones with their ids set),
// signed raws and cursors in one round trip, one statement per kind of
// write, and with commit, COMMIT in the same pipeline. The checks that a
// locked row did change run in the pipeline too (a failed one is an error
// that aborts the transaction before the COMMIT): every CREATED row moved
// to ALLOCATED, every cursor is at its new value. now is the transaction's
// now().
func writeAllocated(ctx context.Context, tx dbConn, ws []groupWrite, now time.Time, commit bool) error {
	b := &pgx.Batch{}
	var ids, nonces, gas, toks []int64
	var subs, to, vals, hashes []string
	var reqs []*string
	var datas [][]byte
	var cIDs, cNonces, cToks []int64
	var cHashes []string
	var sIDs []int64
	var sHash, sKind, sFee, sTip []string
	var sRaw [][]byte
	var curSubs []string
	var curNext, curToks []int64
	for _, w := range ws {
		l := w.l
		for _, t := range w.created {
			cIDs, cNonces, cToks, cHashes = append(cIDs, int64(t.ID)), append(cNonces, int64(*t.Nonce)), append(cToks, l.Token), append(cHashes, string(t.Hash))
		}
		for _, t := range w.fresh {
			ids, nonces, gas, toks = append(ids, int64(t.ID)), append(nonces, int64(*t.Nonce)), append(gas, int64(t.Payload.GasLimit)), append(toks, l.Token)
			subs, to, vals, hashes = append(subs, string(l.Submitter)), append(to, string(t.Payload.To)), append(vals, numeric(t.Payload.Value)), append(hashes, string(t.Hash))
			reqs, datas = append(reqs, nullStr(t.RequestID)), append(datas, data(t.Payload.Data))
		}
		for _, set := range [][]chaintx.Tx{w.created, w.fresh} {
			for _, t := range set {
				sg := t.Signed[0]
				sIDs, sHash, sKind, sFee, sTip = append(sIDs, int64(t.ID)), append(sHash, string(sg.Hash)),
					append(sKind, string(sg.Kind)), append(sFee, numeric(sg.MaxFee)), append(sTip, numeric(sg.MaxTip))
				sRaw = append(sRaw, sg.Raw)
			}
		}
		curSubs, curNext, curToks = append(curSubs, string(l.Submitter)), append(curNext, int64(w.next)), append(curToks, l.Token)
	}
	if len(cIDs) > 0 {
		b.Queue(`WITH w AS (UPDATE managed_tx m SET nonce = u.nonce, tx_hash = u.hash, state = 'ALLOCATED', allocated_at = now(),
				next_resubmit_at = now() + make_interval(secs => $5), fencing_token = u.token, updated_at = now()
			FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[]) AS u(id, nonce, hash, token)
			WHERE m.tx_id = u.id AND m.state = 'CREATED' RETURNING 1)
			SELECT 1 / (count(*) = cardinality($1::bigint[]))::int FROM w`,
			cIDs, cNonces, cHashes, cToks, chaintx.AllocatedGrace.Seconds())
	}
	if len(ids) > 0 {
		b.Queue(`INSERT INTO managed_tx (tx_id, submitter, request_id, nonce, to_address, value_wei, data, gas_limit,
				tx_hash, state, allocated_at, next_resubmit_at, fencing_token)
			SELECT u.id, u.submitter, u.req, u.nonce, u.to_addr, u.val::numeric, u.data, u.gas, u.hash, 'ALLOCATED', now(),
				now() + make_interval(secs => $11), u.token
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::bytea[], $8::bigint[],
				$9::text[], $10::bigint[]) AS u(id, submitter, req, nonce, to_addr, val, data, gas, hash, token)`,
			ids, subs, reqs, nonces, to, vals, datas, gas, hashes, toks, chaintx.AllocatedGrace.Seconds())
	}
	if len(sIDs) > 0 {
		b.Queue(`INSERT INTO managed_tx_signed (tx_id, tx_hash, kind, raw, max_fee, max_tip)
			SELECT u.id, u.hash, u.kind, u.raw, u.fee::numeric, u.tip::numeric
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::text[]) AS u(id, hash, kind, raw, fee, tip)`,
			sIDs, sHash, sKind, sRaw, sFee, sTip)
	}
	if len(curSubs) > 0 {
		b.Queue(`WITH w AS (UPDATE submitter_nonce_cursor c SET next_nonce = u.next, fencing_token = u.token, updated_at = now()
				FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS u(submitter, next, token) WHERE c.submitter = u.submitter
				RETURNING 1)
			SELECT 1 / (count(*) = cardinality($1::text[]))::int FROM w`, curSubs, curNext, curToks)
	}
	if commit {
		b.Queue("COMMIT")
	}
	if b.Len() == 0 {
		return nil
	}
	br := tx.SendBatch(ctx, b)
	for range b.Len() {
		if _, err := br.Exec(); err != nil {
			br.Close()
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "22012" { // the 1 / 0 of a check
				return fmt.Errorf("a locked CREATED row or nonce cursor did not change as written: %w", err)
			}
			return err
		}
	}
	return br.Close()
}

// Submitted implements chaintx.Store: one statement for every group, the
// fence and the write together: the CTE locks the leases that pass (FOR
// SHARE, as fence does) and the UPDATE touches only the txs of those. Its
// transaction (one round trip) commits without waiting for the WAL flush
// (synchronous_commit off, this transaction only): a record lost in a crash
// leaves the tx ALLOCATED, and the resubmit scheduler sends the same signed
// transaction again (the node answers "known" or "nonce too low") and
// records it then; a later synchronous commit flushes it anyway (the WAL is
// one sequence). The txs are found by primary key, one probe each: the
// submitter check is written IS NOT DISTINCT FROM (not an index condition)
// so that missing statistics (a young table, autovacuum off) cannot make
// the planner walk the submitter's whole pending index per tx instead.
func (s *Store) Submitted(ctx context.Context, gs []chaintx.SubmitGroup, after time.Duration) ([]error, error) {
	subs, nodes, tokens := make([]string, len(gs)), make([]string, len(gs)), make([]int64, len(gs))
	var ids, rtoks []int64
	var errTexts, rsubs []string
	for i, g := range gs {
		subs[i], nodes[i], tokens[i] = string(g.Lease.Submitter), g.Lease.Node, g.Lease.Token
		for _, r := range g.Results {
			ids, errTexts = append(ids, int64(r.ID)), append(errTexts, r.Err)
			rsubs, rtoks = append(rsubs, string(g.Lease.Submitter)), append(rtoks, g.Lease.Token)
		}
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit = off")
	b.Queue(`WITH f AS (`+fenceSQL+`), w AS (
			UPDATE managed_tx m SET
				state = CASE WHEN u.err = '' AND m.state = 'ALLOCATED' THEN 'TRACKING' ELSE m.state END,
				next_receipt_at = CASE WHEN u.err = '' AND (m.state = 'ALLOCATED' OR (m.next_receipt_at IS NULL AND m.receipt_hash IS NULL))
					THEN now() ELSE m.next_receipt_at END,
				submit_attempts = m.submit_attempts + 1, last_submit_at = now(),
				last_error = NULLIF(u.err, ''),
				next_resubmit_at = now() + make_interval(secs => CASE WHEN m.resubmit_backoff_s IS NULL THEN $4 ELSE greatest($4, m.resubmit_backoff_s) END),
				fencing_token = u.token, updated_at = now()
			FROM unnest($5::bigint[], $6::text[], $7::text[], $8::bigint[]) AS u(id, err, submitter, token)
			WHERE m.tx_id = u.id AND m.submitter IS NOT DISTINCT FROM u.submitter
				AND (u.submitter, u.token) IN (SELECT submitter, fencing_token FROM f)
				AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK'))
		SELECT submitter, fencing_token FROM f`, subs, nodes, tokens, after.Seconds(), ids, errTexts, rsubs, rtoks)
	b.Queue("COMMIT")
	var passed map[leaseKey]bool
	br := s.pool.SendBatch(ctx, b) // one round trip; a failure leaves the connection in its transaction: the pool drops it
	err := func() error {
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if passed, err = passedLeases(rows); err != nil {
			return err
		}
		_, err = br.Exec()
		return err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: submitted: %w", err)
	}
	errs := make([]error, len(gs))
	for i, g := range gs {
		if !passed[leaseKey{string(g.Lease.Submitter), g.Lease.Token}] || g.Lease.Node == "" {
			errs[i] = chaintx.ErrFenced
		}
	}
	return errs, nil
}

// ClaimResubmit implements chaintx.Store: the due txs are read and locked,
// then each one's schedule is written with its delay.
func (s *Store) ClaimResubmit(ctx context.Context, l chaintx.Lease, limit int, delay func(chaintx.Tx) time.Duration) ([]chaintx.Tx, error) {
	var txs []chaintx.Tx
	err := s.fenced(ctx, l, func(tx pgx.Tx) error {
		var err error
		txs, err = loadTxs(ctx, tx, `SELECT `+txCols+` FROM managed_tx WHERE submitter = $1 AND nonce IS NOT NULL AND confirmed_at IS NULL
				AND state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND receipt_hash IS NULL AND next_resubmit_at <= now()
			ORDER BY nonce LIMIT $2 FOR UPDATE`, string(l.Submitter), limit)
		if err != nil || len(txs) == 0 {
			return err
		}
		ids, secs, backoff := make([]int64, len(txs)), make([]float64, len(txs)), make([]*float64, len(txs))
		for i, t := range txs {
			d := delay(t).Seconds()
			ids[i], secs[i] = int64(t.ID), d
			if t.State == chaintx.Stuck && d > 0 {
				backoff[i] = &d
			}
		}
		_, err = tx.Exec(ctx, `UPDATE managed_tx m SET next_resubmit_at = now() + make_interval(secs => u.secs),
				resubmit_backoff_s = u.backoff, last_submit_at = now(), fencing_token = $4, updated_at = now()
			FROM unnest($1::bigint[], $2::float8[], $3::float8[]) AS u(id, secs, backoff) WHERE m.tx_id = u.id`,
			ids, secs, backoff, l.Token)
		return err
	})
	if err != nil {
		return nil, err
	}
	sortByNonce(txs)
	return txs, nil
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

// ResolveForeign implements chaintx.Store.
func (s *Store) ResolveForeign(ctx context.Context, l chaintx.Lease, id chaintx.TxID, r chaintx.Remediation) error {
	return s.fenced(ctx, l, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE managed_tx SET state = 'FAILED_FINAL', sub_state = $2, confirmed_at = now(),
				next_receipt_at = NULL, next_resubmit_at = NULL, fencing_token = $3, updated_at = now()
			WHERE tx_id = $1 AND submitter = $4 AND state = 'STUCK' AND receipt_hash IS NULL`,
			int64(id), chaintx.SubForeign, l.Token, string(l.Submitter))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return chaintx.ErrNotStuck
		}
		if err := appendCompletions(ctx, tx, []int64{int64(id)}); err != nil {
			return err
		}
		return audit(ctx, tx, r)
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
				next_receipt_at = now(), next_resubmit_at = now(), resubmit_backoff_s = NULL, fencing_token = $3, updated_at = now()
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
		txs, err = loadTxs(ctx, tx, `UPDATE managed_tx SET state = 'STUCK', next_receipt_at = COALESCE(next_receipt_at, now()),
				fencing_token = $4, updated_at = now()
			WHERE tx_id IN (SELECT tx_id FROM managed_tx WHERE submitter = $1 AND nonce IS NOT NULL AND confirmed_at IS NULL AND state IN ('ALLOCATED', 'TRACKING')
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
		tag, err := tx.Exec(ctx, `UPDATE managed_tx SET fencing_token = $2, updated_at = now(), resubmit_backoff_s = NULL,
				next_resubmit_at = now() + make_interval(secs => $4), next_receipt_at = COALESCE(next_receipt_at, now())
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
		if err := writeAllocated(ctx, tx, []groupWrite{{l: l, fresh: []chaintx.Tx{t}, next: uint64(cursor)}}, now, false); err != nil {
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
