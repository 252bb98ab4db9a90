package bench

// These tests run the transfer scenario briefly on the local Postgres: every
// mode commits transfers and none fails or loses a unit (each mode checks
// its money itself), the report carries the ratios, and the throw-away
// database is dropped also when the run is interrupted.

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/pgtest"
)

// databaseExists reports whether database name exists; it skips the test
// when Postgres is unreachable (fails under CI).
func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.AdminURL())
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("Postgres unreachable: %v", err)
		}
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	return exists
}

func shortTransferConfig() TransferConfig {
	return TransferConfig{PGURL: pgtest.AdminURL(), Users: 16, Clients: 4, Pool: 8,
		Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond}
}

func TestRunTransfer(t *testing.T) {
	databaseExists(t, "") // skips without Postgres
	rep, err := RunTransfer(context.Background(), shortTransferConfig())
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*TransferResult{ModeNaive: rep.Naive, ModeFSM: rep.FSM} {
		if r == nil || r.Transfers == 0 || r.Failed != 0 || r.TPS <= 0 || r.P99us < r.P50us {
			t.Fatalf("%s: %+v", name, r)
		}
	}
	if rep.FSM.AvgBatch < 1 || rep.TPSFSMNaive <= 0 || rep.P99FSMNaive <= 0 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.HasPrefix(rep.Database, "ubs_bench_") || databaseExists(t, rep.Database) {
		t.Fatalf("database %q left behind", rep.Database)
	}
}

func TestRunTransferInterruptedDropsDatabase(t *testing.T) {
	databaseExists(t, "") // skips without Postgres
	cfg := shortTransferConfig()
	cfg.Duration = time.Minute
	// The interrupt must land after the database exists (the run itself
	// lasts a minute): 500 ms was sometimes over before it was created on a
	// loaded machine, and then there was nothing to check.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	rep, err := RunTransfer(ctx, cfg)
	if err == nil {
		t.Fatal("interrupted run reported success")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("interrupted run took %v", d)
	}
	if rep.Database == "" {
		t.Fatalf("interrupted before the database was created (%v): nothing was checked", err)
	}
	if !strings.HasPrefix(rep.Database, "ubs_bench_") || databaseExists(t, rep.Database) {
		t.Fatalf("database %q left behind", rep.Database)
	}
}

func TestTransferConfigRefusals(t *testing.T) {
	for _, cfg := range []TransferConfig{
		{Users: 10, Clients: 0, Duration: time.Second},
		{Users: 3, Clients: 4, Duration: time.Second},
		{Users: 10, Clients: 4},
		{Users: 10, Clients: 4, Duration: time.Second, Modes: []string{"bogus"}},
		{Users: 10, Clients: 4, Duration: time.Second, Pool: 1},
	} {
		if err := cfg.defaults(); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}
