package chaintx_test

// One writer transaction for many submitters (Store.Allocate with several
// groups, as the allocGate merges them): each group fenced on its own (a
// stale lease's group writes nothing while the others commit), request_id
// idempotency per group (existing rows and repeats inside the batch use no
// nonce), contiguous nonces per submitter, each cursor advanced exactly;
// Store.Submitted fenced per group likewise; GetByRequests finds exactly the
// refs that exist.

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/pgstore"
	"github.com/ubscore/ubscore/persist/pgtest"
)

// fakeAssign numbers from the database cursor and "signs" with unique fake raws.
func fakeAssign(tag string) chaintx.Assign {
	return func(db uint64, txs []*chaintx.Tx) (uint64, error) {
		for i, t := range txs {
			n := db + uint64(i)
			h := chaintx.Hash(fmt.Sprintf("0x%s%062d", tag, n))
			t.Nonce, t.Hash = &n, h
			t.Signed = []chaintx.Signed{{Hash: h, Raw: []byte(string(h)), Kind: chaintx.KindOriginal, MaxFee: big.NewInt(2), MaxTip: big.NewInt(1)}}
		}
		return db + uint64(len(txs)), nil
	}
}

func TestAllocateManySubmittersOneTransactionFencedPerGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := persist.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	store := pgstore.New(pool)
	subA, subB, subC := anviltest.Addr(101), anviltest.Addr(102), anviltest.Addr(103)
	lease := func(s chaintx.Address) chaintx.Lease {
		l, err := store.AcquireLease(ctx, s, "n1", time.Minute)
		if err != nil || !l.Leader {
			t.Fatalf("lease %s: %+v %v", s, l, err)
		}
		return l
	}
	la, lb, lc := lease(subA), lease(subB), lease(subC)
	old, err := allocOne(store, lc, []chaintx.NewTx{transfer(subC, "c-old", anviltest.Addr(1), 1)}, 0, fakeAssign("c"))
	if err != nil {
		t.Fatal(err)
	}
	staleB := lb
	staleB.Token-- // B's lease was taken over since: its group must write nothing
	res, err := store.Allocate(ctx, []chaintx.AllocGroup{
		{Lease: la, Reqs: []chaintx.NewTx{transfer(subA, "a1", anviltest.Addr(1), 1), transfer(subA, "a2", anviltest.Addr(1), 2),
			transfer(subA, "a1", anviltest.Addr(1), 1)}, MaxCreated: 10, Assign: fakeAssign("a")},
		{Lease: staleB, Reqs: []chaintx.NewTx{transfer(subB, "b1", anviltest.Addr(1), 1)}, MaxCreated: 10, Assign: fakeAssign("b")},
		{Lease: lc, Reqs: []chaintx.NewTx{transfer(subC, "c-old", anviltest.Addr(1), 1), transfer(subC, "c1", anviltest.Addr(1), 3)},
			MaxCreated: 10, Assign: fakeAssign("c")},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := res[0], res[1], res[2]
	if !errors.Is(b.Err, chaintx.ErrFenced) || len(b.Allocated) != 0 {
		t.Fatalf("stale group: %+v", b)
	}
	if a.Err != nil || len(a.Allocated) != 2 || a.Next != 2 || *a.Answers[0].Nonce != 0 || *a.Answers[1].Nonce != 1 ||
		!a.Existing[2] || a.Answers[2].ID != a.Answers[0].ID || a.Existing[0] || a.Existing[1] {
		t.Fatalf("group A: %+v", a)
	}
	if c.Err != nil || !c.Existing[0] || c.Answers[0].ID != old.Allocated[0].ID || len(c.Answers[0].Signed) != 1 ||
		c.Existing[1] || *c.Answers[1].Nonce != 1 || len(c.Allocated) != 1 || c.Next != 2 {
		t.Fatalf("group C: %+v", c)
	}
	count := func(q string, args ...any) int {
		var n int
		if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM managed_tx WHERE submitter = $1`, string(subB)); n != 0 {
		t.Fatalf("fenced group wrote %d txs", n)
	}
	if n := count(`SELECT count(*) FROM submitter_nonce_cursor WHERE submitter = $1`, string(subB)); n != 0 {
		t.Fatal("fenced group wrote its cursor")
	}
	for _, want := range []struct {
		s    chaintx.Address
		next int
	}{{subA, 2}, {subC, 2}} {
		if n := count(`SELECT next_nonce FROM submitter_nonce_cursor WHERE submitter = $1`, string(want.s)); n != want.next {
			t.Fatalf("cursor %s = %d, want %d", want.s, n, want.next)
		}
		if n := count(`SELECT count(*) FROM managed_tx WHERE submitter = $1 AND nonce IS NOT NULL`, string(want.s)); n != want.next {
			t.Fatalf("%s has %d txs with nonces, want %d (contiguous from 0: unique index)", want.s, n, want.next)
		}
	}
	if n := count(`SELECT count(*) FROM managed_tx_signed`); n != 4 {
		t.Fatalf("%d signed txs, want 4", n)
	}

	// Broadcast records: one transaction, fenced per group.
	rsA := []chaintx.SubmitResult{{ID: a.Allocated[0].ID}, {ID: a.Allocated[1].ID, Err: "boom"}}
	errs, err := store.Submitted(ctx, []chaintx.SubmitGroup{{Lease: la, Results: rsA},
		{Lease: staleB, Results: []chaintx.SubmitResult{{ID: c.Allocated[0].ID}}}}, time.Minute)
	if err != nil || errs[0] != nil || !errors.Is(errs[1], chaintx.ErrFenced) {
		t.Fatalf("submitted: %v %v", errs, err)
	}
	if n := count(`SELECT count(*) FROM managed_tx WHERE tx_id = $1 AND state = 'TRACKING' AND submit_attempts = 1`, int64(a.Allocated[0].ID)); n != 1 {
		t.Fatal("A's sent tx is not TRACKING")
	}
	if n := count(`SELECT count(*) FROM managed_tx WHERE tx_id = $1 AND state = 'ALLOCATED' AND last_error = 'boom'`, int64(a.Allocated[1].ID)); n != 1 {
		t.Fatal("A's failed send is not recorded")
	}
	if n := count(`SELECT count(*) FROM managed_tx WHERE tx_id = $1 AND state = 'ALLOCATED' AND submit_attempts = 0`, int64(c.Allocated[0].ID)); n != 1 {
		t.Fatal("a stale lease's record changed a tx")
	}

	got, err := store.GetByRequests(ctx, []chaintx.RequestRef{{Submitter: subA, RequestID: "a1"}, {Submitter: subC, RequestID: "c-old"},
		{Submitter: subB, RequestID: "b1"}, {Submitter: subA, RequestID: "nope"}, {Submitter: subC, RequestID: "a1"}})
	if err != nil || len(got) != 2 {
		t.Fatalf("GetByRequests: %d %v", len(got), err)
	}
	for _, tx := range got {
		if len(tx.Signed) != 1 || !(tx.Submitter == subA && tx.RequestID == "a1" || tx.Submitter == subC && tx.RequestID == "c-old") {
			t.Fatalf("GetByRequests returned %+v", tx)
		}
	}
}
