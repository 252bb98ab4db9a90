package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/ubscore/ubscore/bench"
)

// bench state (issue 39): spec 003 transfers with a short retention through
// the pipeline, in process; memory and snapshot size at each --every, and
// their growth between the first point at or past --compare-from and the
// last (the "flat within 10 % between 5M and 20M"). Not part of
// `bench all` (its full size takes minutes); --transfers picks the size.
func runStateBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench state", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.StateConfig
	var from int
	fs.StringVar(&cfg.Dir, "data", "", "data dir (required; must hold no WAL yet)")
	fs.IntVar(&cfg.Transfers, "transfers", 20_000_000, "transfers to execute")
	fs.IntVar(&cfg.Users, "users", 10_000, "spec 003 users")
	fs.DurationVar(&cfg.Retention, "retention", 200*time.Microsecond, "retention in command time (the clock advances 1 µs per batch of 1024 commands: 200µs keeps ~200k commands' worth)")
	fs.IntVar(&cfg.Every, "every", 1_000_000, "report every this many transfers")
	fs.Uint64Var(&cfg.Snapshot, "snapshot-every", 1_000_000, "commands between snapshots")
	fs.BoolVar(&cfg.NoSync, "nosync", false, "skip fsync (NOT durable; for comparison only)")
	fs.IntVar(&from, "compare-from", 5_000_000, "compare memory and snapshot size from the first point at or past this many transfers to the last")
	var lc largeCompare
	lc.flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if cfg.Dir == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "bench state: --data DIR is required")
		return exitUsage
	}
	if lc.rounds > 0 {
		return lc.run(cfg.Dir, cfg.NoSync, stdout, stderr)
	}
	cfg.Progress = func(p bench.StatePoint) { fmt.Fprintln(stdout, p) }
	pts, err := bench.RunState(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitFail
	}
	first := -1
	for i, p := range pts {
		if p.Transfers >= from {
			first = i
			break
		}
	}
	if first < 0 || first == len(pts)-1 {
		fmt.Fprintln(stdout, "too few points past --compare-from to compare")
		return exitOK
	}
	a, b := pts[first], pts[len(pts)-1]
	fmt.Fprintf(stdout, "from %d to %d transfers: rss x%.3f, heap x%.3f, snapshot x%.3f, retained %d -> %d\n",
		a.Transfers, b.Transfers, float64(b.RSSBytes)/float64(a.RSSBytes), float64(b.HeapBytes)/float64(a.HeapBytes),
		float64(b.SnapBytes)/float64(a.SnapBytes), a.Retained, b.Retained)
	return exitOK
}

// bench restart (issue 39 item 4): journal.Start on a large state.
func runRestartBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench restart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.RestartConfig
	fs.StringVar(&cfg.Dir, "data", "", "data dir (required; must be empty)")
	fs.IntVar(&cfg.Accounts, "accounts", 1_000_000, "accounts (spec 003 users with USD)")
	fs.IntVar(&cfg.Orders, "orders", 1_000_000, "resting orders (one per account)")
	fs.IntVar(&cfg.Markets, "markets", 100, "spot markets the orders rest in")
	fs.IntVar(&cfg.Pending, "pending", 100_000, "PENDING spec 003 transfers")
	fs.IntVar(&cfg.Binary, "binary", 10, "active binary markets")
	fs.StringVar(&cfg.Exchange, "exchange", "", "path of an exchange binary: also time it from process start to /health/ready 200 on the data dir (--pg-url none unless --exchange-args has one)")
	var exArgs string
	fs.StringVar(&exArgs, "exchange-args", "", "more flags for the exchange, space separated (e.g. \"--pg-url postgres://...\")")
	var verbose bool
	fs.BoolVar(&verbose, "v", false, "print the exchange's log lines with their time since its start")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if cfg.Dir == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "bench restart: --data DIR is required")
		return exitUsage
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	cfg.ExchangeArgs = strings.Fields(exArgs)
	if verbose {
		cfg.Progress = stderr
	}
	res, err := bench.RunRestart(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitFail
	}
	fmt.Fprintln(stdout, res)
	return exitOK
}
