package persist

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// sqlRecorder is a pgx tracer keeping the SQL of every query started.
type sqlRecorder struct {
	mu  sync.Mutex
	sql []string
}

func (r *sqlRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	r.sql = append(r.sql, d.SQL)
	r.mu.Unlock()
	return ctx
}

func (r *sqlRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *sqlRecorder) count(substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.sql {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}

// ConfigurePool makes every new connection's backend allocate and free one
// large value (the heap warm-up), after any AfterConnect set before it.
func TestConfigurePoolWarmsEveryConnection(t *testing.T) {
	db := newTestDB(t)
	cfg := db.poolConfig()
	rec := &sqlRecorder{}
	cfg.ConnConfig.Tracer = rec
	var prevRuns int
	var mu sync.Mutex
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		mu.Lock()
		prevRuns++
		mu.Unlock()
		_, err := c.Exec(ctx, "SET application_name = 'prev-hook'")
		return err
	}
	cfg.MinConns, cfg.MaxConns = 0, 3
	ConfigurePool(cfg)
	pool := openPool(t, cfg)
	ctx := context.Background()
	conns := make([]interface{ Release() }, 0, 3)
	for range 3 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var app string
		if err := c.QueryRow(ctx, "SHOW application_name").Scan(&app); err != nil || app != "prev-hook" {
			t.Fatalf("application_name %q (%v): the earlier AfterConnect did not run", app, err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	if warm := rec.count("repeat('x'"); warm != 3 || prevRuns != 3 {
		t.Fatalf("3 connections: %d heap warm-ups, %d earlier hooks; want 3 and 3", warm, prevRuns)
	}
	// On each connection (opened one after the other) the earlier hook ran
	// first: every warm-up directly follows it.
	for i, q := range rec.sql {
		if strings.Contains(q, "repeat('x'") && (i == 0 || !strings.Contains(rec.sql[i-1], "prev-hook")) {
			t.Fatalf("statements %q: a warm-up not right after the earlier hook", rec.sql)
		}
	}
}
