package transfer

// This test proves a batch equivalent to its requests run alone (each a
// batch of one: the answer every caller is promised, batch.go) on random
// streams: the same seeded requests (CAS transitions, retry notes,
// withdraws, deposits and refunds as fused steps (opReq), with repeats, conflicting parameters,
// frozen / disabled / missing accounts and rows, refunds with and without
// their withdraw) run as random-sized batches on one database and one by
// one on another, in the order the batch applies them. Every answer and,
// at the end, every row of balances_tb, transfer_operations and
// transfers_tb must be the same.
// A failure prints the seed; UBS_BATCH_SEED replays it.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/ulid"
)

// diffSide is one database of the differential test.
type diffSide struct {
	pool    *pgxpool.Pool
	store   *Store
	funding *Funding
	alone   *batchWriter // runs one request at a time
}

func newDiffSide(t *testing.T, transfers []Transfer, opIDs []string) diffSide {
	t.Helper()
	ctx := context.Background()
	pool := migratedPool(t)
	b := NewBatcher(pool, BatchOptions{})
	d := diffSide{pool: pool, store: NewStore(b), funding: NewFunding(b),
		alone: &batchWriter{pool: pool, timeout: 10 * time.Second, stats: &BatchStats{}}}
	t.Cleanup(d.alone.release)
	// user 1: two assets; 2: frozen; 3: disabled; 4: BTC only (USDT row
	// missing, account exists); 5: no account at all.
	for i, dep := range []struct {
		user   UserID
		asset  AssetID
		amount Units
	}{{1, usdt, 1000}, {1, btc, 50}, {2, usdt, 400}, {3, usdt, 500}, {4, btc, 100}} {
		if _, err := d.funding.ExternalDeposit(ctx, "seed-"+strconv.Itoa(i), dep.user, dep.asset, dep.amount); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.funding.SetStatus(ctx, 2, usdt, model.Frozen); err != nil {
		t.Fatal(err)
	}
	if err := d.funding.SetStatus(ctx, 3, usdt, model.Disabled); err != nil {
		t.Fatal(err)
	}
	b.Start()
	for _, tr := range transfers {
		if _, _, err := d.store.Insert(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	if err := hold(ctx, pool, opIDs...); err != nil { // the operations' holder transfers (opReq)
		t.Fatal(err)
	}
	return d
}

// randomRequests returns n requests over the given transfers and a pool of
// operation ids, most of which keep their parameters across repeats.
func randomRequests(rng *rand.Rand, n int, transfers []Transfer, opIDs []string) []*batchReq {
	type params struct {
		user   UserID
		asset  AssetID
		amount Units
	}
	fixed := map[string]params{}
	amounts := []Units{1, 5, 100, 300, 2000}
	pick := func() params {
		return params{UserID(1 + rng.IntN(5)), []AssetID{usdt, btc}[rng.IntN(2)], amounts[rng.IntN(len(amounts))]}
	}
	var pairs [][2]State
	for _, from := range AllStates {
		for _, to := range AllStates {
			if CanTransition(from, to) {
				pairs = append(pairs, [2]State{from, to})
			}
		}
	}
	// guess follows each transfer along the CAS requests made so far, so most
	// of them chain (several steps of one transfer in one batch) and win.
	guess := map[string]State{}
	reqs := make([]*batchReq, n)
	for i := range reqs {
		switch k := rng.IntN(10); {
		case k < 2:
			id := transfers[rng.IntN(len(transfers))].ReqID
			p := pairs[rng.IntN(len(pairs))]
			if next := legal[guess[id]]; len(next) > 0 && rng.IntN(4) != 0 {
				p = [2]State{guess[id], next[rng.IntN(len(next))]}
				guess[id] = p[1]
			}
			reqs[i] = &batchReq{kind: kindCAS, reqID: id, from: p[0], to: p[1], msg: []string{"", "cas msg"}[rng.IntN(2)]}
		case k < 3:
			reqs[i] = &batchReq{kind: kindNote, reqID: transfers[rng.IntN(len(transfers))].ReqID,
				from: AllStates[rng.IntN(len(AllStates))], msg: "note " + strconv.Itoa(i)}
		default:
			id := opIDs[rng.IntN(len(opIDs))]
			p, seen := fixed[id]
			if !seen || rng.IntN(10) == 0 { // a new id, or a repeat with other parameters
				p = pick()
				if !seen {
					fixed[id] = p
				}
			}
			reqs[i] = opReq([]model.Op{model.OpWithdraw, model.OpDeposit, model.OpRefund}[rng.IntN(3)], id, p.user, p.asset, p.amount)
		}
	}
	return reqs
}

// oneStepEach is how many of reqs, from the first, hold at most one
// FUNDING operation of a req_id: a second fused step of a transfer in one
// batch is LOST (queueFusedLocks), while alone it would run.
func oneStepEach(reqs []*batchReq) int {
	seen := map[string]bool{}
	for i, r := range reqs {
		if r.kind == kindFused {
			if seen[r.reqID] {
				return i
			}
			seen[r.reqID] = true
		}
	}
	return len(reqs)
}

// aloneAnswer runs a copy of r alone: a batch of one.
func (d diffSide) aloneAnswer(ctx context.Context, r *batchReq) batchAnswer {
	one := *r
	one.ctx, one.done = ctx, make(chan batchAnswer, 1)
	d.alone.run([]*batchReq{&one})
	return <-one.done
}

// appliedOrder is the order one batch applies its requests in: CAS
// transitions, then notes, then FUNDING operations, each in arrival order
// (rounds keep the order of requests on one transfer; requests on
// different transfers commute).
func appliedOrder(reqs []*batchReq) []int {
	var out []int
	for _, k := range []reqKind{kindCAS, kindNote, kindFused} {
		for i, r := range reqs {
			if r.kind == k {
				out = append(out, i)
			}
		}
	}
	return out
}

// dump renders the tables the two paths write, for comparison.
func dump(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var out string
	for _, q := range []string{
		`SELECT user_id, asset_id, available, status, version FROM balances_tb ORDER BY 1, 2`,
		`SELECT req_id, op, result, COALESCE(code, ''), user_id, asset_id, amount FROM transfer_operations ORDER BY 1, 2`,
		`SELECT req_id, state, retry_count, COALESCE(error_message, '') FROM transfers_tb ORDER BY 1`,
	} {
		rows, err := pool.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			out += fmt.Sprintln(v...)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestBatchMatchesRequestsAlone(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("UBS_BATCH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (UBS_BATCH_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	ids := ulid.NewGen()
	newID := func() string {
		id, err := ids.New()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	transfers := make([]Transfer, 12)
	for i := range transfers {
		transfers[i] = Transfer{ReqID: newID(), UserID: 1, From: model.AccountFunding, To: model.AccountSpot, Asset: usdt, Amount: 1}
	}
	opIDs := make([]string, 30)
	for i := range opIDs {
		opIDs[i] = newID()
	}
	alone, batched := newDiffSide(t, transfers, opIDs), newDiffSide(t, transfers, opIDs)
	w := &batchWriter{pool: batched.pool, timeout: 10 * time.Second, stats: &BatchStats{}}
	defer w.release()
	ctx := context.Background()

	reqs := randomRequests(rng, 600, transfers, opIDs)
	for len(reqs) > 0 {
		n := oneStepEach(reqs[:min(1+rng.IntN(80), len(reqs))])
		batch := reqs[:n]
		reqs = reqs[n:]
		for _, r := range batch {
			r.ctx, r.done = ctx, make(chan batchAnswer, 1)
		}
		w.run(batch)
		for _, i := range appliedOrder(batch) {
			r := batch[i]
			got, want := <-r.done, alone.aloneAnswer(ctx, r)
			if got.err != nil || want.err != nil || got.won != want.won || got.out != want.out {
				t.Fatalf("seed %d: %+v: batched %+v, alone %+v", seed, *r, got, want)
			}
		}
	}
	if a, b := dump(t, alone.pool), dump(t, batched.pool); a != b {
		t.Fatalf("seed %d: tables differ\nalone:\n%s\nbatched:\n%s", seed, a, b)
	}
	if w.stats.Batches.Load() == 0 || w.stats.Failed.Load() != 0 {
		t.Fatalf("batches %d, failed %d", w.stats.Batches.Load(), w.stats.Failed.Load())
	}
}
