package pgtest

import (
	"context"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Seed is a run's seed: the environment variable env when set, else the
// clock; logged under env's name so that a failure names it.
func Seed(t testing.TB, env string) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(env); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", env, err)
		}
		seed = n
	}
	t.Logf("seed %d (%s)", seed, env)
	return seed
}

// KillSessions is a Postgres outage, again and again: every gap plus up to
// spread (drawn from rng) it ends every session of dbURL's database but its
// own and the spared pids (pg_terminate_backend: FATAL 57P01, as in a fast
// shutdown), counting in outages the rounds that ended at least one. It
// touches no other database, so it is safe beside other tests on the shared
// server (never stop that server). It returns when ctx ends.
func KillSessions(ctx context.Context, t testing.TB, dbURL string, gap, spread time.Duration, rng *rand.Rand,
	outages *atomic.Int64, spare ...uint32) {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Error(err)
		return
	}
	db := strings.TrimPrefix(u.Path, "/")
	keep := make([]int64, len(spare))
	for i, p := range spare {
		keep[i] = int64(p)
	}
	conn, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close(context.Background())
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap + time.Duration(rng.Int64N(int64(spread)))):
		}
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid() AND NOT (pid = ANY($2))) k`, db, keep).Scan(&n); err != nil {
			if ctx.Err() == nil {
				t.Error(err)
			}
			return
		}
		if n > 0 {
			outages.Add(1)
		}
	}
}
