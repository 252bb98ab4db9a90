package transfer

// Test helpers: a throw-away migrated database per test (as in persist's
// pg_helpers_test.go), a harness wiring a Coordinator on the one path
// production runs (a Batcher, fused steps) over the real FUNDING adapter
// (faults injected inside its transactions) and a fakespot.Spot (wrapped in
// Faulty), and the conservation check.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/persist/transfer/fakespot"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/testkit"
	"github.com/ubscore/ubscore/persist/transfer/transferfault"
)

// migratedPool creates a throw-away database (see pgtest.NewDB), migrates
// it and returns a pool on it, closed when the test ends.
func migratedPool(t testing.TB) *pgxpool.Pool { return testkit.MigratedPool(t, pgtest.NewDB(t), 32) }

const usdt, btc = testkit.USDT, testkit.BTC

func lookupAsset(s string) (model.AssetConfig, bool) { return testkit.Lookup(s) }

func waitFor(t *testing.T, what string, cond func() bool) { t.Helper(); testkit.WaitFor(t, what, cond) }

type harness struct {
	t       *testing.T
	pool    *pgxpool.Pool
	store   *Store
	funding *Funding
	spot    *fakespot.Spot
	fundF   *transferfault.Faulty // FUNDING faults, injected inside the batch transactions (Batcher.SetFaults)
	spotF   *transferfault.Faulty // wraps spot: the coordinator's SPOT side
	crit    *testkit.CritCounter
	coord   *Coordinator
}

func newHarness(t *testing.T) *harness { return newHarnessOn(t, migratedPool(t)) }

// newHarnessOn is newHarness on pool: the one path production runs, a
// Batcher with fused steps, FUNDING faults injected below it.
func newHarnessOn(t *testing.T, pool *pgxpool.Pool) *harness {
	t.Helper()
	h, _ := newHarnessWith(t, pool, BatchOptions{})
	return h
}

// newHarnessWith is newHarnessOn with the Batcher's options opt; it
// returns the Batcher too.
func newHarnessWith(t *testing.T, pool *pgxpool.Pool, opt BatchOptions) (*harness, *Batcher) {
	t.Helper()
	b := NewBatcher(pool, opt)
	h := &harness{t: t, pool: pool, store: NewStore(b), funding: NewFunding(b),
		spot: fakespot.New(), crit: &testkit.CritCounter{}, fundF: transferfault.New(nil)}
	b.SetFaults(h.fundF)
	b.Start()
	t.Cleanup(b.Close) // before the pool closes (cleanups run last-in first-out)
	h.spotF = transferfault.New(h.spot)
	h.coord = h.newCoordinator(nil)
	return h, b
}

// newCoordinator returns another coordinator on the same sides (a second
// process, as far as the FSM can tell). mod may adjust its Config.
func (h *harness) newCoordinator(mod func(*Config)) *Coordinator {
	cfg := Config{Store: h.store, Spot: h.spotF, Assets: lookupAsset,
		MaxWait: 300 * time.Millisecond, RetryBase: time.Millisecond, RetryMax: 20 * time.Millisecond,
		Logger: slog.New(h.crit)}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewCoordinator(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) deposit(user UserID, asset AssetID, amount Units) {
	h.t.Helper()
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	if _, err := h.funding.ExternalDeposit(context.Background(), "tx-"+hex.EncodeToString(rnd[:]), user, asset, amount); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) fundingBalance(user UserID, asset AssetID) Units {
	h.t.Helper()
	st, err := h.funding.AccountState(context.Background(), user, asset)
	if err != nil {
		h.t.Fatal(err)
	}
	return st.Available
}

func (h *harness) get(reqID string) Transfer {
	h.t.Helper()
	tr, err := h.store.Get(context.Background(), reqID)
	if err != nil {
		h.t.Fatal(err)
	}
	return tr
}

// conserved checks spec 7.2 to the unit for asset:
// funding + spot + in-flight == deposits + spot external credits.
func (h *harness) conserved(asset AssetID) {
	h.t.Helper()
	ft, err := h.funding.Totals(context.Background(), asset)
	if err != nil {
		h.t.Fatal(err)
	}
	spotTotal, spotExt := h.spot.Totals(asset)
	if ft.Uncertain != 0 {
		h.t.Fatalf("conservation: %d transfers in an uncertain state", ft.Uncertain)
	}
	if got, want := ft.Balance+spotTotal+ft.InFlight, ft.Deposits+spotExt; got != want {
		h.t.Fatalf("conservation broken for asset %d: funding %d + spot %d + in-flight %d = %d, want deposits %d + spot external %d = %d",
			asset, ft.Balance, spotTotal, ft.InFlight, got, ft.Deposits, spotExt, want)
	}
}

// create runs a transfer request as user; fails the test on a refusal.
func (h *harness) create(c *Coordinator, user UserID, from, to, asset, amount, cid string) Result {
	h.t.Helper()
	r, err := c.Create(context.Background(), model.Caller{Authenticated: true, UserID: user},
		model.Request{From: from, To: to, Asset: asset, Amount: amount, CID: cid})
	if err != nil {
		h.t.Fatalf("create %s->%s %s %s: %v", from, to, amount, asset, err)
	}
	return r
}

// insertAt stores a transfer directly in state st (a crash left it there).
func (h *harness) insertAt(user UserID, from, to model.AccountType, asset AssetID, amount Units, st State) Transfer {
	h.t.Helper()
	id, err := h.coord.ids.New()
	if err != nil {
		h.t.Fatal(err)
	}
	ctx := context.Background()
	tr, _, err := h.store.Insert(ctx, Transfer{ReqID: id, UserID: user, From: from, To: to, Asset: asset, Amount: amount})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.pool.Exec(ctx, `UPDATE transfers_tb SET state = $2 WHERE req_id = $1`, id, int16(st)); err != nil {
		h.t.Fatal(err)
	}
	tr.State = st
	return tr
}
