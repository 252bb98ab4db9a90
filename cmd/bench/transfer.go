package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ubscore/ubscore/bench"
)

// runTransfer measures internal transfers on Postgres: the naive
// one-transaction ledger and the transfer FSM on its one path (batched,
// fused steps), on one throw-away database in one run (see
// bench/transfer.go).
func runTransfer(args []string, stdout, stderr io.Writer) int {
	return transferScenario("transfer", args, stdout, stderr)
}

// pgBaselineReport is pg-baseline's one-line JSON report.
type pgBaselineReport struct {
	Users   int                   `json:"users"`
	Clients int                   `json:"clients"`
	Pool    int                   `json:"pool"`
	Naive   *bench.TransferResult `json:"naive"`
}

// runPGBaseline is the naive one-transaction ledger alone: what Postgres
// does for a transfer with no FSM (transfer's "naive" mode).
func runPGBaseline(args []string, stdout, stderr io.Writer) int {
	return transferScenario("pg-baseline", args, stdout, stderr)
}

// transferScenario runs "transfer" or "pg-baseline" (transfer with only
// the naive mode and its own report).
func transferScenario(name string, args []string, stdout, stderr io.Writer) int {
	baseline := name == "pg-baseline"
	fs := flag.NewFlagSet("bench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg     bench.TransferConfig
		modes   string
		asJSON  bool
		cpuprof string
	)
	fs.StringVar(&cfg.PGURL, "pg-url", bench.DefaultTransferPGURL, "admin Postgres URL; database ubs_bench_<random> is created and dropped through it")
	fs.IntVar(&cfg.Users, "users", bench.DefaultTransferUsers, "users, each with FUNDING and SPOT funds (>= clients)")
	fs.IntVar(&cfg.Clients, "clients", bench.DefaultTransferClients, "concurrent closed-loop clients")
	fs.IntVar(&cfg.Pool, "pool", bench.DefaultTransferPool, "most Postgres connections the bench opens")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured time per mode")
	fs.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "unmeasured warm-up per mode")
	modes = bench.ModeNaive
	if !baseline {
		fs.StringVar(&modes, "modes", "naive,fsm", "modes to run, comma-separated")
		fs.IntVar(&cfg.Batch.MaxBatch, "max-batch", 0, "fsm: requests per transaction (0 = default)")
		fs.IntVar(&cfg.Batch.Writers, "writers", 0, "fsm: batch transactions in flight (0 = default)")
	}
	fs.BoolVar(&asJSON, "json", false, "print the report as one JSON line")
	fs.StringVar(&cpuprof, "cpuprofile", "", "write a CPU profile of the bench process to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "bench %s: no positional arguments are allowed\n", name)
		fs.Usage()
		return exitUsage
	}
	cfg.Modes = strings.Split(modes, ",")
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// An interrupt stops the clients; the database is dropped on the way out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProf, err := bench.StartCPUProfile(cpuprof)
	if err != nil {
		fmt.Fprintf(stderr, "bench %s: %v\n", name, err)
		return exitFail
	}
	rep, err := bench.RunTransfer(ctx, cfg)
	if perr := stopProf(); err == nil {
		err = perr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench %s: %v\n", name, err)
		return exitFail
	}
	if baseline && asJSON {
		return printJSON(stdout, stderr, name, pgBaselineReport{Users: rep.Users, Clients: rep.Clients, Pool: rep.Pool,
			Naive: rep.Naive})
	}
	if asJSON {
		b, err := json.Marshal(rep)
		if err != nil {
			fmt.Fprintln(stderr, "bench transfer:", err)
			return exitFail
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintf(stdout, "%d clients, %d users, pool %d, %v per mode\n", rep.Clients, rep.Users, rep.Pool, cfg.Duration)
	for _, m := range []struct {
		name string
		r    *bench.TransferResult
	}{{bench.ModeNaive, rep.Naive}, {bench.ModeFSM, rep.FSM}} {
		if m.r == nil {
			continue
		}
		fmt.Fprintf(stdout, "%-12s %9.1f tps  p50 %7.0f us  p99 %7.0f us  p99.9 %7.0f us  failed %d",
			m.name, m.r.TPS, m.r.P50us, m.r.P99us, m.r.P999us, m.r.Failed)
		if m.r.AvgBatch > 0 {
			fmt.Fprintf(stdout, "  (%.1f requests per batch)", m.r.AvgBatch)
		}
		if m.r.FirstErr != "" {
			fmt.Fprintf(stdout, "  first error: %s", m.r.FirstErr)
		}
		fmt.Fprintln(stdout)
	}
	if rep.TPSFSMNaive > 0 {
		fmt.Fprintf(stdout, "fsm / naive: tps x%.2f, p99 x%.2f\n", rep.TPSFSMNaive, rep.P99FSMNaive)
	}
	return exitOK
}
