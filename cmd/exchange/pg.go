package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ubscore/ubscore/persist"
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
		log.Info("postgres: using the configured server", "url", persist.RedactURL(cfg.PGURL))
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
