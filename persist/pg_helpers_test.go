package persist

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/pgtest"
)

// testDB is a throw-away database, dropped when the test ends.
type testDB struct {
	name string
	cfg  *pgxpool.Config // a fresh copy per call of poolConfig
}

// newTestDB creates a throw-away database (see pgtest.NewDB).
func newTestDB(t testing.TB) *testDB {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	return &testDB{name: cfg.ConnConfig.Database, cfg: cfg}
}

// poolConfig returns a copy of the database's pool config.
func (d *testDB) poolConfig() *pgxpool.Config { return d.cfg.Copy() }

// pool opens a pool on the database, closed when the test ends.
func (d *testDB) pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return openPool(t, d.poolConfig())
}

func openPool(t testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// migratedDB creates a database, migrates it and returns a pool on it.
func migratedDB(t testing.TB) (*testDB, *pgxpool.Pool) {
	t.Helper()
	db := newTestDB(t)
	pool := db.pool(t)
	if err := Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return db, pool
}

// terminateBackends kills every other connection to the database.
func (d *testDB) terminateBackends(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.AdminURL())
	if err != nil {
		t.Error(err)
		return 0
	}
	defer admin.Close(ctx)
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()`, d.name).Scan(&n); err != nil {
		t.Error(err)
	}
	return n
}

// dumpTable returns every row of table as JSON text, in primary key order.
func dumpTable(t *testing.T, pool *pgxpool.Pool, table, orderBy string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		"SELECT row_to_json(x)::text FROM "+table+" x ORDER BY "+orderBy)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpAll returns the rows of every read-model table (not the checkpoint).
func dumpAll(t *testing.T, pool *pgxpool.Pool) map[string][]string {
	t.Helper()
	return map[string][]string{
		"orders":      dumpTable(t, pool, "orders", "order_id"),
		"trades":      dumpTable(t, pool, "trades", "trade_id"),
		"spot_ledger": dumpTable(t, pool, "spot_ledger", "seq, idx"),
		"wal_events":  dumpTable(t, pool, "wal_events", "seq, idx"),
		"breakers":    dumpTable(t, pool, "circuit_breaker_events", "trigger_seq"),
		"binary":      dumpTable(t, pool, "binary_markets", "created_seq"),
		"positions":   dumpTable(t, pool, "positions", "market_id, user_id"),
	}
}

// resetTables empties the read model and the checkpoint.
func resetTables(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `TRUNCATE orders, trades, spot_ledger, wal_events, circuit_breaker_events, binary_markets, positions RESTART IDENTITY;
		UPDATE core_checkpoint SET persisted_seq = 0`); err != nil {
		t.Fatal(err)
	}
}

func queryInt(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var v int64
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}
