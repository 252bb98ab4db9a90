package invariant

// A harness as persist/transfer's own: a throw-away migrated database, a
// Coordinator on the one path (a Batcher, fused steps, FUNDING faults
// injected inside its transactions) and a FakeSpot wrapped in Faulty.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/persist/transfer"
)

const (
	usdt transfer.AssetID = 1 // precision 6
	btc  transfer.AssetID = 2 // precision 8
)

var testAssets = map[string]transfer.AssetConfig{
	"USDT": {ID: usdt, Symbol: "USDT", Precision: 6, MinTransfer: 1, MaxTransfer: 1_000_000_000_000, Status: transfer.AssetActive, InternalTransferEnabled: true},
	"BTC":  {ID: btc, Symbol: "BTC", Precision: 8, MinTransfer: 1000, MaxTransfer: 100_000_000_000, Status: transfer.AssetActive, InternalTransferEnabled: true},
}

// critCounter is an slog handler counting records at LevelCritical or above.
type critCounter struct{ n atomic.Int64 }

func (h *critCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *critCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= transfer.LevelCritical {
		h.n.Add(1)
	}
	return nil
}
func (h *critCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *critCounter) WithGroup(string) slog.Handler      { return h }

type harness struct {
	t       *testing.T
	pool    *pgxpool.Pool
	store   *transfer.Store
	funding *transfer.Funding
	spot    *transfer.FakeSpot
	fundF   *transfer.Faulty // FUNDING faults, inside the batch transactions
	spotF   *transfer.Faulty // wraps spot: the coordinator's SPOT side
	crit    *critCounter
	coord   *transfer.Coordinator
	ids     *transfer.ULIDGen
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := persist.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	b := transfer.NewBatcher(pool, transfer.BatchOptions{})
	h := &harness{t: t, pool: pool, store: transfer.NewStore(b), funding: transfer.NewFunding(b),
		spot: transfer.NewFakeSpot(), crit: &critCounter{}, fundF: transfer.NewFaulty(nil), ids: transfer.NewULIDGen()}
	b.SetFaults(h.fundF)
	b.Start()
	t.Cleanup(b.Close) // before the pool closes
	h.spotF = transfer.NewFaulty(h.spot)
	h.coord, err = transfer.NewCoordinator(transfer.Config{Store: h.store, Funding: h.funding, Spot: h.spotF,
		Assets:  func(s string) (transfer.AssetConfig, bool) { a, ok := testAssets[s]; return a, ok },
		MaxWait: 300 * time.Millisecond, RetryBase: time.Millisecond, RetryMax: 20 * time.Millisecond, Logger: slog.New(h.crit)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func newID(t *testing.T, h *harness) string {
	t.Helper()
	id, err := h.ids.New()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (h *harness) deposit(user transfer.UserID, asset transfer.AssetID, amount transfer.Units) {
	h.t.Helper()
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	if _, err := h.funding.ExternalDeposit(context.Background(), "tx-"+hex.EncodeToString(rnd[:]), user, asset, amount); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) get(reqID string) transfer.Transfer {
	h.t.Helper()
	tr, err := h.store.Get(context.Background(), reqID)
	if err != nil {
		h.t.Fatal(err)
	}
	return tr
}

// create runs a transfer request as user; fails the test on a refusal.
func (h *harness) create(c *transfer.Coordinator, user transfer.UserID, from, to, asset, amount, cid string) transfer.Result {
	h.t.Helper()
	r, err := c.Create(context.Background(), transfer.Caller{Authenticated: true, UserID: user},
		transfer.Request{From: from, To: to, Asset: asset, Amount: amount, CID: cid})
	if err != nil {
		h.t.Fatalf("create %s->%s %s %s: %v", from, to, amount, asset, err)
	}
	return r
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
