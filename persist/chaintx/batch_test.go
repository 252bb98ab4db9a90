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
	pool := migratedPool(t, pgtest.NewDB(t))
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

// fakeGuess is a writer's guess for reqs from next, "signed" with tag (so
// a result shows which path allocated it: the guess, or Assign).
func fakeGuess(tag string, next uint64, reqs []chaintx.NewTx) *chaintx.AllocGuess {
	g := &chaintx.AllocGuess{Next: next}
	ptrs := make([]*chaintx.Tx, len(reqs))
	g.Txs = make([]chaintx.Tx, len(reqs))
	for i, r := range reqs {
		g.Txs[i] = chaintx.Tx{Submitter: r.Submitter, RequestID: r.RequestID, Payload: r.Payload}
		ptrs[i] = &g.Txs[i]
	}
	if _, err := fakeAssign(tag)(next, ptrs); err != nil {
		panic(err)
	}
	return g
}

// The one-round-trip allocation (Store.Allocate with a guess per group):
// used when every expectation holds; otherwise nothing of the guesses is
// written and the regular path decides (from the cursor, answering existing
// request_ids, taking CREATED rows, fencing per group).
func TestAllocateGuessedOrRegular(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedPool(t, pgtest.NewDB(t))
	store := pgstore.New(pool)
	count := func(q string, args ...any) int {
		var n int
		if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	subA, subB := anviltest.Addr(111), anviltest.Addr(112)
	lease := func(s chaintx.Address) chaintx.Lease {
		l, err := store.AcquireLease(ctx, s, "n1", time.Minute)
		if err != nil || !l.Leader {
			t.Fatalf("lease %s: %+v %v", s, l, err)
		}
		return l
	}
	la, lb := lease(subA), lease(subB)
	group := func(l chaintx.Lease, tag string, next uint64, reqs ...chaintx.NewTx) chaintx.AllocGroup {
		tag += map[chaintx.Address]string{subA: "a", subB: "b"}[l.Submitter] // hashes differ between submitters
		return chaintx.AllocGroup{Lease: l, Reqs: reqs, MaxCreated: 10, Assign: fakeAssign("r" + tag), Guess: fakeGuess("g"+tag, next, reqs)}
	}
	for _, l := range []chaintx.Lease{la, lb} { // the first allocation makes the cursor: a guess cannot hold yet
		res, err := store.Allocate(ctx, []chaintx.AllocGroup{group(l, "0", 0, transfer(l.Submitter, "first", anviltest.Addr(1), 1))})
		if err != nil || res[0].Err != nil || res[0].Allocated[0].Hash[:4] != "0xr0" || *res[0].Allocated[0].Nonce != 0 {
			t.Fatalf("first allocation: %+v %v", res, err)
		}
	}
	check := func(what string, gs []chaintx.AllocGroup, want ...string) []chaintx.AllocResult {
		t.Helper()
		res, err := store.Allocate(ctx, gs)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for i, r := range res {
			var got string
			switch {
			case r.Err != nil:
				got = r.Err.Error()
			case len(r.Allocated) > 0:
				got = fmt.Sprintf("%s %d..%d next %d", r.Allocated[0].Hash[:4], *r.Allocated[0].Nonce, *r.Allocated[len(r.Allocated)-1].Nonce, r.Next)
			}
			if got != want[i] {
				t.Fatalf("%s: group %d: %q, want %q (%+v)", what, i, got, want[i], r)
			}
			for j, a := range r.Allocated {
				if a.ID == 0 || a.State != chaintx.Allocated || a.AllocatedAt == nil || a.FencingToken != gs[i].Lease.Token {
					t.Fatalf("%s: group %d tx %d: %+v", what, i, j, a)
				}
				st, err := store.Get(ctx, a.ID)
				if err != nil || st.Hash != a.Hash || *st.Nonce != *a.Nonce || st.RequestID != a.RequestID || len(st.Signed) != 1 ||
					st.Signed[0].Hash != a.Hash || string(st.Signed[0].Raw) != string(a.Hash) || st.State != chaintx.Allocated {
					t.Fatalf("%s: stored %+v (%v), answered %+v", what, st, err, a)
				}
			}
		}
		return res
	}
	// Every expectation holds: the guesses are written as signed, one transaction.
	res := check("guessed", []chaintx.AllocGroup{
		group(la, "1", 1, transfer(subA, "a1", anviltest.Addr(1), 1), transfer(subA, "", anviltest.Addr(1), 2)),
		group(lb, "1", 5, transfer(subB, "b1", anviltest.Addr(1), 1)), // the chain is ahead of the cursor (1): nonce 5
	}, "0xg1 1..2 next 3", "0xg1 5..5 next 6")
	if res[0].Answers[0].RequestID != "a1" || res[0].Answers[1].RequestID != "" || res[0].Existing[0] || res[0].Existing[1] {
		t.Fatalf("answers: %+v", res[0])
	}
	// A guess behind the cursor (a stale cache): the regular path, from the cursor.
	check("cursor ahead", []chaintx.AllocGroup{
		group(la, "2", 2, transfer(subA, "a2", anviltest.Addr(1), 1)),
		group(lb, "2", 4, transfer(subB, "b2", anviltest.Addr(1), 1)),
	}, "0xr2 3..3 next 4", "0xr2 6..6 next 7")
	// A request_id that exists: answered, no nonce used, the others allocated.
	res = check("existing request", []chaintx.AllocGroup{
		group(la, "3", 4, transfer(subA, "a3", anviltest.Addr(1), 1)),
		group(lb, "3", 7, transfer(subB, "b1", anviltest.Addr(1), 1), transfer(subB, "b3", anviltest.Addr(1), 1)),
	}, "0xr3 4..4 next 5", "0xr3 7..7 next 8")
	if !res[1].Existing[0] || *res[1].Answers[0].Nonce != 5 || res[1].Existing[1] {
		t.Fatalf("existing request: %+v", res[1])
	}
	// A CREATED row of A: allocated too (first, as the regular path does).
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.InsertCreated(ctx, tx, transfer(subA, "a-created", anviltest.Addr(1), 1)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res = check("created row", []chaintx.AllocGroup{
		group(la, "4", 5, transfer(subA, "a4", anviltest.Addr(1), 1)),
		group(lb, "4", 8, transfer(subB, "b4", anviltest.Addr(1), 1)),
	}, "0xr4 5..6 next 7", "0xr4 8..8 next 9")
	if res[0].Allocated[0].RequestID != "a-created" || res[0].Answers[0].RequestID != "a4" {
		t.Fatalf("created row: %+v", res[0])
	}
	// A stale lease: that group is fenced and writes nothing; the other is allocated.
	staleB := lb
	staleB.Token--
	check("fenced", []chaintx.AllocGroup{
		group(la, "5", 7, transfer(subA, "a5", anviltest.Addr(1), 1)),
		group(staleB, "5", 9, transfer(subB, "b5", anviltest.Addr(1), 1)),
	}, "0xr5 7..7 next 8", chaintx.ErrFenced.Error())
	if n := count(`SELECT count(*) FROM managed_tx WHERE request_id = 'b5'`); n != 0 {
		t.Fatal("a fenced group's guess was written")
	}
	// And guessed again once the expectations hold.
	check("guessed again", []chaintx.AllocGroup{
		group(la, "6", 8, transfer(subA, "a6", anviltest.Addr(1), 1)),
		group(lb, "6", 9, transfer(subB, "b6", anviltest.Addr(1), 1), transfer(subB, "b7", anviltest.Addr(1), 1)),
	}, "0xg6 8..8 next 9", "0xg6 9..10 next 11")
	for _, s := range []chaintx.Address{subA, subB} {
		if n := count(`SELECT count(*) FROM managed_tx WHERE submitter = $1 AND nonce IS NULL`, string(s)); n != 0 {
			t.Fatalf("%s: %d txs without nonce", s, n)
		}
		if n := count(`SELECT count(*) FROM managed_tx_signed g JOIN managed_tx m USING (tx_id) WHERE m.submitter = $1 AND g.tx_hash = m.tx_hash`, string(s)); n != count(`SELECT count(*) FROM managed_tx WHERE submitter = $1`, string(s)) {
			t.Fatalf("%s: a tx without its signed original", s)
		}
	}
	if a, b := count(`SELECT next_nonce FROM submitter_nonce_cursor WHERE submitter = $1`, string(subA)), count(`SELECT next_nonce FROM submitter_nonce_cursor WHERE submitter = $1`, string(subB)); a != 9 || b != 11 {
		t.Fatalf("cursors %d %d", a, b)
	}
}

// migratedPool opens a pool on url (a throw-away database) with every
// migration applied; it is closed when the test ends.
func migratedPool(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	if err := persist.Migrate(ctx, pool); err != nil {
		tb.Fatal(err)
	}
	return pool
}
