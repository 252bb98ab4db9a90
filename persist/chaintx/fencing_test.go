package chaintx_test

// Spec §1.3 (a): two nodes with separate pools contend for one submitter;
// the leader stops (killed: its manager is torn down without releasing
// anything) past its lease; the new leader's token is higher, and every
// kind of critical write the old one attempts afterwards returns ErrFenced
// and changes 0 rows — while the same write with the new lease does change
// rows (so each check could fail).

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/pgstore"
)

// snapshot digests every chaintx table.
func (e *env) snapshot() string {
	e.t.Helper()
	var out string
	for _, q := range []string{
		`SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY tx_id), '')) FROM managed_tx t`,
		`SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY tx_hash), '')) FROM managed_tx_signed t`,
		`SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY submitter), '')) FROM submitter_nonce_cursor t`,
		`SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY seq), '')) FROM tx_completions t`,
		`SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY id), '')) FROM tx_remediations t`,
	} {
		var s string
		if err := e.pool.QueryRow(context.Background(), q).Scan(&s); err != nil {
			e.t.Fatal(err)
		}
		out += s
	}
	return out
}

func TestOldLeaderEveryCriticalWriteFenced(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	key, sub := e.node.NewKey(t)
	cfgA := e.fast(key, "node-a", pgstore.New(e.newPool()))
	cfgA.Finality = 1000 // receipts stay unfinalised
	cfgA.Lease = chaintx.LeaseConfig{Duration: time.Second, RenewInterval: 200 * time.Millisecond}
	a := e.start(cfgA)
	storeB := pgstore.New(e.newPool())
	if l, err := storeB.AcquireLease(ctx, sub, "node-b", time.Second); err != nil || l.Leader {
		t.Fatalf("B while A leads: %+v %v", l, err)
	}
	mined := e.create(a, transfer(sub, "mined", anviltest.Addr(3), 1)) // automine: gets a receipt
	waitFor(t, 5*time.Second, "receipt", func() bool { return e.get(mined.ID).Receipt != nil })
	if err := e.node.Automine(false); err != nil {
		t.Fatal(err)
	}
	pending := e.create(a, transfer(sub, "pending", anviltest.Addr(3), 2))
	e.waitState(pending.ID, chaintx.Tracking, 5*time.Second)
	if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		_, err := pgstore.InsertCreated(ctx, tx, transfer(sub, "created", anviltest.Addr(3), 3))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	old, ok := a.Leader(sub)
	if !ok {
		t.Fatal("A is not leader")
	}
	// A must not allocate the CREATED row before it is "killed": it is
	// stopped at once (its tracker nudges every 100ms; a race is harmless:
	// the test only needs some CREATED row or none, see below).
	a.Close()
	time.Sleep(1200 * time.Millisecond) // past A's lease
	newL, err := storeB.AcquireLease(ctx, sub, "node-b", 5*time.Second)
	if err != nil || !newL.Leader || newL.Token <= old.Token {
		t.Fatalf("take-over: %+v (old token %d) %v", newL, old.Token, err)
	}
	minedTx, pendingTx := e.get(mined.ID), e.get(pending.ID)
	var cursor int64
	if err := e.pool.QueryRow(ctx, `SELECT next_nonce FROM submitter_nonce_cursor WHERE submitter = $1`, string(sub)).Scan(&cursor); err != nil {
		t.Fatal(err)
	}
	signer := e.signer(key)
	fees, err := e.node.Client.Fees(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hashN := 0
	sign := func(nonce uint64, value int64) chaintx.Signed {
		hashN++
		p := chaintx.Payload{To: anviltest.Addr(4), Value: big.NewInt(value + int64(hashN)), GasLimit: 21000}
		h, raw, err := signer.Sign(chaintx.Unsigned{Nonce: nonce, Payload: p, Fees: fees})
		if err != nil {
			t.Fatal(err)
		}
		return chaintx.Signed{Hash: h, Raw: raw, Kind: chaintx.KindReplace, MaxFee: fees.MaxFee, MaxTip: fees.MaxTip}
	}
	assign := func(db uint64, txs []*chaintx.Tx) (uint64, error) {
		for i, tx := range txs {
			n := db + uint64(i)
			s := sign(n, 0)
			s.Kind = chaintx.KindOriginal
			tx.Nonce, tx.Hash, tx.Signed = &n, s.Hash, []chaintx.Signed{s}
		}
		return db + uint64(len(txs)), nil
	}
	rem := func(l chaintx.Lease) chaintx.Remediation {
		return chaintx.Remediation{Submitter: sub, TxID: pendingTx.ID, Nonce: *pendingTx.Nonce, Action: chaintx.ActionNoop,
			NodeID: l.Node, FencingToken: l.Token, Reason: "fencing test"}
	}
	writes := []struct {
		name string
		do   func(l chaintx.Lease) error
	}{
		{"allocate (nonce, cursor, signed raw)", func(l chaintx.Lease) error {
			_, err := allocOne(e.store, l, []chaintx.NewTx{transfer(sub, fmt.Sprint("new-", l.Token), anviltest.Addr(3), 4)}, 10, assign)
			return err
		}},
		{"submitted (state, schedule)", func(l chaintx.Lease) error {
			return submittedOne(e.store, l, []chaintx.SubmitResult{{ID: pendingTx.ID}}, -time.Hour) // due for the claim below
		}},
		{"claim resubmit (schedule)", func(l chaintx.Lease) error {
			_, err := e.store.ClaimResubmit(ctx, l, 10, func(chaintx.Tx) time.Duration { return -time.Hour }) // -1h: due again at once for the next check
			return err
		}},
		{"record receipt not found (schedule)", func(l chaintx.Lease) error {
			return e.store.RecordReceipts(ctx, l, []chaintx.ReceiptUpdate{{ID: pendingTx.ID, Retry: time.Minute}})
		}},
		{"reorged (receipt, state)", func(l chaintx.Lease) error {
			return e.store.Reorged(ctx, l, minedTx.ID, minedTx.Receipt.BlockHash)
		}},
		{"record receipt found (receipt)", func(l chaintx.Lease) error {
			r := *minedTx.Receipt
			return e.store.RecordReceipts(ctx, l, []chaintx.ReceiptUpdate{{ID: minedTx.ID, Receipt: &r}})
		}},
		{"finalize (finality, completion)", func(l chaintx.Lease) error {
			return e.store.Finalize(ctx, l, minedTx.ID, chaintx.Confirmed, "")
		}},
		{"add signed (replacement raw + audit)", func(l chaintx.Lease) error {
			return e.store.AddSigned(ctx, l, pendingTx.ID, sign(*pendingTx.Nonce, 100), rem(l))
		}},
		{"audit", func(l chaintx.Lease) error { return e.store.Audit(ctx, l, rem(l)) }},
		{"insert placeholder", func(l chaintx.Lease) error {
			if _, err := e.pool.Exec(ctx, `UPDATE submitter_nonce_cursor SET next_nonce = next_nonce + 1 WHERE submitter = $1 AND $2`,
				string(sub), l.Token == newL.Token); err != nil {
				return err
			}
			n := uint64(cursor) + 50 // below the cursor only once the new leader moved it: see next line
			if l.Token == newL.Token {
				if err := e.pool.QueryRow(ctx, `SELECT next_nonce - 1 FROM submitter_nonce_cursor WHERE submitter = $1`, string(sub)).Scan(&n); err != nil {
					return err
				}
			}
			s := sign(n, 0)
			s.Kind = chaintx.KindPlaceholder
			_, err := e.store.InsertPlaceholder(ctx, l, chaintx.Tx{Submitter: sub, RequestID: fmt.Sprint("placeholder:", n),
				Payload: chaintx.Payload{To: sub, Value: new(big.Int), GasLimit: 21000}, Nonce: &n, Hash: s.Hash,
				Signed: []chaintx.Signed{s}}, rem(l))
			return err
		}},
		{"mark stuck (state, completion)", func(l chaintx.Lease) error {
			_, err := e.store.MarkStuck(ctx, l, 0, 10)
			return err
		}},
	}
	for _, w := range writes {
		before := e.snapshot()
		if err := w.do(old); !errors.Is(err, chaintx.ErrFenced) {
			t.Errorf("%s with the old token: %v, want ErrFenced", w.name, err)
		}
		if e.snapshot() != before {
			t.Errorf("%s with the old token changed rows", w.name)
		}
		if err := w.do(newL); err != nil {
			t.Errorf("%s with the new token: %v", w.name, err)
		}
		if e.snapshot() == before {
			t.Errorf("%s with the new token changed nothing: the fenced check above proves nothing", w.name)
		}
	}
	if l, err := e.store.AcquireLease(ctx, sub, "node-a", time.Second); err != nil || l.Leader {
		t.Fatalf("old node re-acquiring while B leads: %+v %v", l, err)
	}
	// The token alone fences too: B's own lease expires and B comes back
	// with token + 1; its writes under the previous token are refused.
	if _, err := e.pool.Exec(ctx, `UPDATE submitter_lease SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	again, err := storeB.AcquireLease(ctx, sub, "node-b", 5*time.Second)
	if err != nil || !again.Leader || again.Token != newL.Token+1 {
		t.Fatalf("B back after expiry: %+v %v", again, err)
	}
	if err := e.store.Audit(ctx, newL, rem(newL)); !errors.Is(err, chaintx.ErrFenced) {
		t.Fatalf("same node, previous token: %v, want ErrFenced", err)
	}
}
