// Command exchange runs the UBSCore exchange core.
//
//	exchange [--http ADDR] [--data-dir DIR] [--pg-url URL|none] [--jwt-secret S] [--config FILE]
//	exchange token --user N [--admin] [--ttl 1h] [--data-dir DIR] [--jwt-secret S]
//
// The server recovers the core from --data-dir (snapshot + WAL + invariant
// check), installs the configured instruments (built-in by default) on a
// fresh data dir, and runs the sequenced pipeline until SIGINT/SIGTERM, when
// it drains, fsyncs, snapshots and exits. Without --pg-url it runs a private
// PostgreSQL cluster under <data-dir>/pg (see persist/localpg), or none if
// the host has no PostgreSQL binaries. Settings: see Config (config.go).
//
// Logs are log/slog records on stdout: JSON when stdout is not a terminal,
// text otherwise. Secrets (the JWT secret, Postgres passwords) are never
// logged.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"golang.org/x/term"

	"github.com/ubscore/ubscore/logging"
	"github.com/ubscore/ubscore/replication"
)

func main() {
	err := run(os.Args[1:])
	var ue usageError
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "exchange:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "exchange:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "token" {
		return runToken(args[1:], os.Getenv, os.Stdout, os.Stderr)
	}
	// Register before anything is logged, so a signal sent as soon as the
	// process speaks is a graceful shutdown, never a kill.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Lines are batched (at most logging.FlushEvery late; WARN and above
	// flush at once); the deferred Close flushes the rest.
	out := logging.NewBuffered(os.Stdout)
	defer out.Close()
	log := slog.New(logging.NewBufferedHandler(out, term.IsTerminal(int(os.Stdout.Fd()))))
	cfg, err := loadConfig(args, os.Getenv, os.Stderr, log)
	if err != nil {
		return err
	}
	pgURL, stopPG, err := setupPostgres(ctx, cfg, log)
	if err != nil {
		return err
	}
	cfg.PGURL = pgURL
	if path := os.Getenv("UBS_CPUPROFILE"); path != "" { // profiling runs only
		f, perr := os.Create(path)
		if perr == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	cfg.Replication.Logger = log
	fo, err := replication.OpenFailover(ctx, cfg.Replication) // nil unless --failover auto
	if err != nil {
		return errors.Join(err, stopPG())
	}
	cfg.Replication.Auto = fo
	for err = serve(ctx, cfg, log); ctx.Err() == nil; err = serve(ctx, cfg, log) {
		role := replication.NextRole(err, cfg.Replication) // promoted: the primary; rejoining: a standby
		if role == "" {
			break
		}
		cfg.Replication.Role = role
	}
	if ctx.Err() != nil && (errors.Is(err, replication.ErrPromoted) || errors.Is(err, replication.ErrRejoin)) {
		err = nil // a signal met a change of role: a graceful stop all the same
	}
	if fo != nil {
		fo.Close() // a primary's lease is released: a standby takes over at once
	}
	if perr := stopPG(); perr != nil {
		log.Error("postgres: stop failed", "err", perr.Error())
		err = errors.Join(err, perr)
	}
	return err
}

// newLogger logs text to a terminal, JSON otherwise, in the project's
// format (logging.NewHandler: a named CRITICAL level, readable durations).
func newLogger(w io.Writer, terminal bool) *slog.Logger {
	return slog.New(logging.NewHandler(w, terminal))
}
