package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/ubscore/ubscore/bench"
)

// runSink is `bench sink`: the pipeline's workload through the journal
// while the Postgres sink follows the WAL into a throw-away database.
func runSink(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench sink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.SinkConfig
	asJSON := fs.Bool("json", false, "print the report as one JSON line")
	fs.StringVar(&cfg.AdminURL, "pg-url", bench.DefaultTransferPGURL, "admin Postgres URL (database ubs_bench_<random> is created and dropped)")
	fs.StringVar(&cfg.Dir, "data", "", "WAL data dir (empty: a temp dir, removed afterwards)")
	fs.IntVar(&cfg.Commands, "commands", 300_000, "commands to submit")
	fs.IntVar(&cfg.Producers, "producers", 4, "producer goroutines")
	fs.IntVar(&cfg.Batch, "batch", bench.DefaultBatch, "seqs claimed per SubmitFunc call")
	fs.Float64Var(&cfg.Rate, "rate", 0, "offered commands/s (0 = closed loop: the full pipeline rate)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "workload seed")
	fs.IntVar(&cfg.Workload.Users, "users", bench.DefaultUsers, "funded users")
	fs.IntVar(&cfg.Workload.SeedPerBook, "seed-per-book", bench.DefaultSeedPerBook, "resting orders seeded per book")
	fs.IntVar(&cfg.MaxBatch, "sink-batch", 0, "the sink's records per transaction (0 = persist default)")
	fs.DurationVar(&cfg.Timeout, "timeout", bench.DefaultSinkTimeout, "how long the sink may take to catch up after the last ack")
	cpuprof := fs.String("cpuprofile", "", "write a CPU profile of the run (pipeline, follower and sink; not Postgres) to this file")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "bench sink:", err); return exitFail }
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "ubs-bench-sink-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stop, err := bench.StartCPUProfile(*cpuprof)
	if err != nil {
		return fail(err)
	}
	res, err := bench.RunSink(cfg)
	if perr := stop(); err == nil {
		err = perr
	}
	if err != nil {
		return fail(err)
	}
	if *asJSON {
		return printJSON(stdout, stderr, "sink", res)
	}
	fmt.Fprintf(stdout, "commands        %d\npipeline        %.0f cmd/s\nsink            %.0f records/s, %.0f events/s, %.0f rows/s (%d transactions)\n"+
		"sink / pipeline %.3f\nlag             p50 %.1f ms  p99 %.1f ms  max %.1f ms (commit - ack, per record)\ncatch-up        %.3f s after the last ack\n",
		res.Commands, res.PipelineRate, res.RecordsPerSec, res.EventsPerSec, res.RowsPerSec, res.Batches, res.Ratio,
		res.LagP50ms, res.LagP99ms, res.LagMaxms, res.CatchUpSec)
	return exitOK
}
