package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ubscore/ubscore/persist/localpg"
)

// setupPostgres resolves cfg.PGURL into the URL serve uses and a function
// that releases what was started for it (call it after serve returns; it
// uses its own timeout, not ctx):
//
//   - "none": no Postgres ("", no-op).
//   - a URL: used as is (logged with its password redacted).
//   - "": a private cluster under <data-dir>/pg (localpg), stopped by the
//     returned func; without PostgreSQL binaries on the host, no Postgres
//     (a warning), so `make run` works anywhere.
func setupPostgres(ctx context.Context, cfg Config, log *slog.Logger) (url string, stop func() error, err error) {
	noop := func() error { return nil }
	switch cfg.PGURL {
	case pgNone:
		log.Info("postgres: disabled (--pg-url none)")
		return "", noop, nil
	case "":
	default:
		log.Info("postgres: using the configured server", "url", redactURL(cfg.PGURL))
		return cfg.PGURL, noop, nil
	}
	c, err := localpg.Start(ctx, cfg.privatePostgresDir(), log)
	if errors.Is(err, localpg.ErrNoPostgres) {
		log.Warn("postgres: cannot run a private cluster; running without Postgres (give --pg-url to use a server)", "reason", err.Error())
		return "", noop, nil
	}
	if err != nil {
		return "", noop, err
	}
	log.Info("postgres: private cluster", "url", c.URL(), "dir", cfg.privatePostgresDir())
	return c.URL(), c.Stop, nil
}

// plainOnLoopback turns TLS off in c when every host it would try is on
// this machine (loopback address, localhost, unix socket) and the operator
// did not choose an sslmode (in the URL or PGSSLMODE): pgx's default,
// sslmode=prefer, encrypts the loopback traffic of the sink (about 7 rows
// per order) for no protection, at a measurable CPU cost on both ends. It
// reports whether it changed c.
func plainOnLoopback(rawURL string, c *pgconn.Config, getenv func(string) string) bool {
	if c.TLSConfig == nil || strings.Contains(rawURL, "sslmode") || getenv("PGSSLMODE") != "" {
		return false
	}
	if !isLocalHost(c.Host) {
		return false
	}
	for _, f := range c.Fallbacks {
		if f.Host != c.Host || f.Port != c.Port {
			return false
		}
	}
	c.TLSConfig, c.Fallbacks = nil, nil
	return true
}

func isLocalHost(h string) bool {
	if h == "localhost" || strings.HasPrefix(h, "/") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
