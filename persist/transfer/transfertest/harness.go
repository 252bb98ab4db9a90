// Package transfertest is a test harness over persist/transfer's exported
// API for the packages beside it (invariant, ratelimit): on a throw-away
// migrated database (package testkit, with the test assets), a Coordinator
// on the one path (a Batcher, fused steps, FUNDING faults injected inside
// its transactions) and a fakespot.Spot wrapped in transferfault.Faulty.
// persist/transfer's own internal tests cannot import this package (it
// imports persist/transfer); their harness (helpers_test.go) shares testkit with it.
package transfertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/fakespot"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/testkit"
	"github.com/ubscore/ubscore/persist/transfer/transferfault"
	"github.com/ubscore/ubscore/persist/transfer/ulid"
)

// Harness is one test's transfer service parts.
type Harness struct {
	T       *testing.T
	Pool    *pgxpool.Pool
	Store   *transfer.Store
	Funding *transfer.Funding
	Spot    *fakespot.Spot
	FundF   *transferfault.Faulty // FUNDING faults, inside the batch transactions
	SpotF   *transferfault.Faulty // wraps Spot: the coordinator's SPOT side
	Crit    *testkit.CritCounter
	Coord   *transfer.Coordinator
	IDs     *ulid.Gen
}

// New returns a Harness on a fresh database, closed when the test ends.
func New(t *testing.T) *Harness {
	t.Helper()
	pool := testkit.MigratedPool(t, pgtest.NewDB(t), 32)
	b := transfer.NewBatcher(pool, transfer.BatchOptions{})
	h := &Harness{T: t, Pool: pool, Store: transfer.NewStore(b), Funding: transfer.NewFunding(b),
		Spot: fakespot.New(), Crit: &testkit.CritCounter{}, FundF: transferfault.New(nil), IDs: ulid.NewGen()}
	b.SetFaults(h.FundF)
	b.Start()
	t.Cleanup(b.Close) // before the pool closes
	h.SpotF = transferfault.New(h.Spot)
	h.Coord = h.NewCoordinator(nil)
	return h
}

// NewCoordinator returns another coordinator on h's sides (another
// process, as far as the FSM can tell); mod may adjust its Config.
func (h *Harness) NewCoordinator(mod func(*transfer.Config)) *transfer.Coordinator {
	h.T.Helper()
	cfg := transfer.Config{Store: h.Store, Spot: h.SpotF, Assets: testkit.Lookup,
		MaxWait: 300 * time.Millisecond, RetryBase: time.Millisecond, RetryMax: 20 * time.Millisecond, Logger: slog.New(h.Crit)}
	if mod != nil {
		mod(&cfg)
	}
	c, err := transfer.NewCoordinator(cfg)
	if err != nil {
		h.T.Fatal(err)
	}
	return c
}

// NewID draws a req_id.
func (h *Harness) NewID() string {
	h.T.Helper()
	id, err := h.IDs.New()
	if err != nil {
		h.T.Fatal(err)
	}
	return id
}

// Deposit credits user's FUNDING account as an external deposit.
func (h *Harness) Deposit(user transfer.UserID, asset transfer.AssetID, amount transfer.Units) {
	h.T.Helper()
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	if _, err := h.Funding.ExternalDeposit(context.Background(), "tx-"+hex.EncodeToString(rnd[:]), user, asset, amount); err != nil {
		h.T.Fatal(err)
	}
}

// FundingBalance is user's available FUNDING balance of asset.
func (h *Harness) FundingBalance(user transfer.UserID, asset transfer.AssetID) transfer.Units {
	h.T.Helper()
	st, err := h.Funding.AccountState(context.Background(), user, asset)
	if err != nil {
		h.T.Fatal(err)
	}
	return st.Available
}

// Get reads a transfer.
func (h *Harness) Get(reqID string) transfer.Transfer {
	h.T.Helper()
	tr, err := h.Store.Get(context.Background(), reqID)
	if err != nil {
		h.T.Fatal(err)
	}
	return tr
}

// Create runs a transfer request as user; fails the test on a refusal.
func (h *Harness) Create(c *transfer.Coordinator, user transfer.UserID, from, to, asset, amount, cid string) transfer.Result {
	h.T.Helper()
	r, err := c.Create(context.Background(), model.Caller{Authenticated: true, UserID: user},
		model.Request{From: from, To: to, Asset: asset, Amount: amount, CID: cid})
	if err != nil {
		h.T.Fatalf("create %s->%s %s %s: %v", from, to, amount, asset, err)
	}
	return r
}
