package persist

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres health for GET /health (readiness does not depend on it once the
// server has been ready: a later outage degrades, never un-readies).
const (
	pgPingInterval = time.Second
	pgPingTimeout  = time.Second
)

// Health pings Postgres every pgPingInterval and keeps the outcome; it
// logs each change (the error's detail goes to the log, never to the
// unauthenticated /health).
type Health struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	up   atomic.Bool
	seen atomic.Bool // reached at least once
}

// NewHealth returns pool's health, unknown until Run has pinged once.
func NewHealth(pool *pgxpool.Pool, log *slog.Logger) *Health {
	return &Health{pool: pool, log: log}
}

// Run pings until ctx ends.
func (h *Health) Run(ctx context.Context) {
	t := time.NewTicker(pgPingInterval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, pgPingTimeout)
		err := h.pool.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch up := err == nil; {
		case up && !h.up.Load():
			h.log.Info("postgres: reachable")
		case !up && (h.up.Load() || !h.seen.Load()):
			h.log.Warn("postgres: unreachable; FUNDING, internal transfers and the order archive wait for it", "err", err)
		}
		h.up.Store(err == nil)
		h.seen.Store(true)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Degraded is gateway.ServerConfig.Degraded.
func (h *Health) Degraded() []string {
	switch {
	case h.up.Load():
		return nil
	case !h.seen.Load():
		return []string{"postgres: not reached yet"}
	}
	return []string{"postgres: unreachable (FUNDING, internal transfers and the order archive are unavailable; trading continues)"}
}
