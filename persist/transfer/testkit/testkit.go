// Package testkit is what the tests of persist/transfer and of the packages
// beside it share and that needs nothing of the FSM's package (so its own
// internal tests can import it): a throw-away migrated database, the test
// assets, a counter of critical log records and a polling wait. The
// harnesses over the FSM are persist/transfer's helpers_test.go (internal)
// and package transfertest (exported API), both built on this.
package testkit

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/logging"
	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// MigratedPool migrates the database at url (pgtest.NewDB makes a
// throw-away one) and returns a pool of at most maxConns on it, closed when
// the test ends.
func MigratedPool(t testing.TB, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := persist.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

// The test assets.
const (
	USDT model.AssetID = 1 // precision 6
	BTC  model.AssetID = 2 // precision 8
)

// Assets are the test asset configurations by symbol.
var Assets = map[string]model.AssetConfig{
	"USDT": {ID: USDT, Symbol: "USDT", Precision: 6, MinTransfer: 1, MaxTransfer: 1_000_000_000_000, Status: model.AssetActive, InternalTransferEnabled: true},
	"BTC":  {ID: BTC, Symbol: "BTC", Precision: 8, MinTransfer: 1000, MaxTransfer: 100_000_000_000, Status: model.AssetActive, InternalTransferEnabled: true},
}

// Lookup is a coordinator's Config.Assets over Assets.
func Lookup(s string) (model.AssetConfig, bool) { a, ok := Assets[s]; return a, ok }

// CritCounter is an slog handler counting records at LevelCritical or above.
type CritCounter struct{ N atomic.Int64 }

func (h *CritCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *CritCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= logging.LevelCritical {
		h.N.Add(1)
	}
	return nil
}
func (h *CritCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *CritCounter) WithGroup(string) slog.Handler      { return h }

// WaitFor polls cond until it holds or 10 seconds pass (then the test fails).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
