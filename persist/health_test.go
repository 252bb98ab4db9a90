package persist

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/pgtest"
)

// TestHealth: unknown before the first ping ("not reached yet"), nil
// while Postgres answers, "unreachable" when it does not.
func TestHealth(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for name, url := range map[string]string{"up": pgtest.NewDB(t), "down": "postgres://postgres@127.0.0.1:1/none?connect_timeout=1"} {
		t.Run(name, func(t *testing.T) {
			pool, err := pgxpool.New(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			h := NewHealth(pool, log)
			if d := h.Degraded(); len(d) != 1 || !strings.Contains(d[0], "not reached yet") {
				t.Fatalf("before a ping: %v", d)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { h.Run(ctx) })
			defer func() { cancel(); wg.Wait() }()
			deadline := time.Now().Add(30 * time.Second)
			for !h.seen.Load() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			d := h.Degraded()
			if name == "up" && d != nil || name == "down" && (len(d) != 1 || !strings.Contains(d[0], "unreachable")) {
				t.Fatalf("%s: %v", name, d)
			}
		})
	}
}
