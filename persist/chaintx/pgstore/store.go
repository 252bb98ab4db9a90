// Package pgstore is the Postgres adapter of persist/chaintx (the Store
// port): leases, the nonce cursor, managed_tx and its signed transactions,
// the completions feed and the remediation audit (migration 0030). Every
// write that takes a Lease is fenced (fence below).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/chaintx"
)

// Store implements chaintx.Store on a migrated database.
type Store struct{ pool *pgxpool.Pool }

var _ chaintx.Store = (*Store)(nil)

// New returns the store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// fence locks the lease row FOR SHARE if it is still l's (owner, token,
// unexpired by the database clock); ErrFenced otherwise. Held until the
// transaction ends, the lock makes a take-over (FOR UPDATE) wait, so a
// write that passed the fence commits before the new leader's first one.
func fence(ctx context.Context, tx pgx.Tx, l chaintx.Lease) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM submitter_lease WHERE submitter = $1 AND owner_node = $2
		AND fencing_token = $3 AND expires_at > clock_timestamp() FOR SHARE`, string(l.Submitter), l.Node, l.Token).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return chaintx.ErrFenced
	}
	return err
}

// fenceSQL selects (and locks FOR SHARE, in submitter order) the leases of
// the arrays $1 (submitter), $2 (node), $3 (token) that are still theirs:
// owner, token, unexpired by the database clock. As with fence, the lock
// makes a take-over wait until the transaction that passed it ends.
const fenceSQL = `SELECT l.submitter, l.fencing_token FROM submitter_lease l
	JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS g(submitter, node, token)
		ON l.submitter = g.submitter AND l.owner_node = g.node AND l.fencing_token = g.token
	WHERE l.expires_at > clock_timestamp() ORDER BY l.submitter FOR SHARE OF l`

type leaseKey struct {
	s string
	t int64
}

// passedLeases reads the (submitter, token) rows of fenceSQL.
func passedLeases(rows pgx.Rows) (map[leaseKey]bool, error) {
	defer rows.Close()
	passed := map[leaseKey]bool{}
	for rows.Next() {
		var k leaseKey
		if err := rows.Scan(&k.s, &k.t); err != nil {
			return nil, err
		}
		passed[k] = true
	}
	return passed, rows.Err()
}

// leaseArrays are the arguments $1..$3 of fenceSQL.
func leaseArrays(leases []chaintx.Lease) (subs, nodes []string, tokens []int64) {
	subs, nodes, tokens = make([]string, len(leases)), make([]string, len(leases)), make([]int64, len(leases))
	for i, l := range leases {
		subs[i], nodes[i], tokens[i] = string(l.Submitter), l.Node, l.Token
	}
	return subs, nodes, tokens
}

// fenced runs fn in a transaction that passed fence.
func (s *Store) fenced(ctx context.Context, l chaintx.Lease, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := fence(ctx, tx, l); err != nil {
			return err
		}
		return fn(tx)
	})
}

// ReleaseLease implements chaintx.Store. Its row lock (FOR UPDATE, as
// UPDATE takes) waits for the fenced transactions holding the row FOR SHARE.
func (s *Store) ReleaseLease(ctx context.Context, l chaintx.Lease) error {
	_, err := s.pool.Exec(ctx, `UPDATE submitter_lease SET expires_at = clock_timestamp(), updated_at = now()
		WHERE submitter = $1 AND owner_node = $2 AND fencing_token = $3 AND expires_at > clock_timestamp()`,
		string(l.Submitter), l.Node, l.Token)
	if err != nil {
		return fmt.Errorf("pgstore: release lease: %w", err)
	}
	return nil
}

// AcquireLease implements chaintx.Store (§3.1): SELECT ... FOR UPDATE; none:
// insert token 1; ours and unexpired: renew; expired: take over with token + 1.
func (s *Store) AcquireLease(ctx context.Context, sub chaintx.Address, node string, d time.Duration) (chaintx.Lease, error) {
	l := chaintx.Lease{Submitter: sub, Node: node}
	secs := d.Seconds()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var owner string
		var live bool
		err := tx.QueryRow(ctx, `SELECT owner_node, fencing_token, expires_at > clock_timestamp() FROM submitter_lease
			WHERE submitter = $1 FOR UPDATE`, string(sub)).Scan(&owner, &l.Token, &live)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			tag, err := tx.Exec(ctx, `INSERT INTO submitter_lease (submitter, owner_node, fencing_token, expires_at)
				VALUES ($1, $2, 1, clock_timestamp() + make_interval(secs => $3)) ON CONFLICT DO NOTHING`, string(sub), node, secs)
			if err != nil || tag.RowsAffected() == 0 {
				return err // a concurrent insert won: not leader this round
			}
			l.Token, l.Leader = 1, true
		case err != nil:
			return err
		case live && owner != node:
			return nil
		default:
			if !live {
				l.Token++ // take over (or come back after our own lease expired): a new token
			}
			if _, err := tx.Exec(ctx, `UPDATE submitter_lease SET owner_node = $2, fencing_token = $3,
				expires_at = clock_timestamp() + make_interval(secs => $4), updated_at = now() WHERE submitter = $1`,
				string(sub), node, l.Token, secs); err != nil {
				return err
			}
			l.Leader = true
		}
		return tx.QueryRow(ctx, `SELECT expires_at FROM submitter_lease WHERE submitter = $1`, string(sub)).Scan(&l.ExpiresAt)
	})
	if err != nil {
		return chaintx.Lease{}, fmt.Errorf("pgstore: lease: %w", err)
	}
	return l, nil
}

// InsertCreated inserts a CREATED managed tx (no nonce) inside the caller's
// transaction (a withdrawal's, with its FUNDING debit). Not fenced: it
// allocates nothing; only the lease holder's writer gives it a nonce.
func InsertCreated(ctx context.Context, tx pgx.Tx, n chaintx.NewTx) (chaintx.TxID, error) {
	var id int64
	var req *string
	if n.RequestID != "" {
		req = &n.RequestID
	}
	err := tx.QueryRow(ctx, `INSERT INTO managed_tx (submitter, request_id, to_address, value_wei, data, gas_limit, state)
		VALUES ($1, $2, $3, $4, $5, $6, 'CREATED') RETURNING tx_id`,
		string(n.Submitter), req, string(n.Payload.To), numeric(n.Payload.Value), data(n.Payload.Data), int64(n.Payload.GasLimit)).Scan(&id)
	return chaintx.TxID(id), err
}

func numeric(v *big.Int) string {
	if v == nil {
		return "0"
	}
	return v.String()
}

func data(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// nullStr is s or NULL when empty.
func nullStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
