package main

import (
	"context"
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

// pgHealth pings Postgres every pgPingInterval and keeps the last outcome.
type pgHealth struct {
	pool *pgxpool.Pool
	last atomic.Pointer[string] // the last ping's error; nil after a success
}

func newPGHealth(pool *pgxpool.Pool) *pgHealth {
	h := &pgHealth{pool: pool}
	msg := "not reached yet"
	h.last.Store(&msg)
	return h
}

// run pings until ctx ends.
func (h *pgHealth) run(ctx context.Context) {
	t := time.NewTicker(pgPingInterval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, pgPingTimeout)
		err := h.pool.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			msg := err.Error()
			h.last.Store(&msg)
		} else {
			h.last.Store(nil)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// degraded is gateway.ServerConfig.Degraded: why Postgres is not serving.
func (h *pgHealth) degraded() []string {
	if p := h.last.Load(); p != nil {
		return []string{"postgres: " + *p + " (FUNDING, internal transfers and the order archive are unavailable; trading continues)"}
	}
	return nil
}
