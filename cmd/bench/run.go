package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `usage: bench <scenario> [flags]

scenarios:
  pipeline      durable commands/s and submit->ack latency through the journal pipeline
  processor     the core alone, in process, on the mixed workload (vs the 3M commands/s target);
                --shape book: on a public-benchmark-shaped flow vs a bare FIFO book, same run
  disk-ceiling  append + fdatasync of WAL-sized records at the journal's batch sizes: the disk's ceiling
  replay        restart cost: snapshot load + WAL replay of N commands
  http          POST /api/v1/order on the real exchange binary vs a fasthttp hello-world baseline
  http-ceiling  the fasthttp hello-world target alone with the same load generator
  sweep         latency vs offered load (open loop, corrected for coordinated omission) on the exchange
  transfer      internal transfers on Postgres: naive one-transaction ledger vs the transfer FSM, unbatched and batched
  pg-baseline   the naive one-transaction ledger alone on Postgres
  sink          Postgres sink throughput and lag (commit - ack) while the pipeline runs its workload
  p2p           spec 003 transfers: POST /transfers and GET balance vs the hello-world ceiling, core execution, publisher
  replication   durable commands/s and ack latency with sync replication (R=3 JetStream, in process) vs the local WAL alone
  ws            WebSocket fan-out: 1,000 subscribers on one market; pipeline rate with it on vs off, msgs/s, ack -> delivery latency
  state         spec 003 transfers with a short retention through the pipeline: memory and snapshot size vs transfers made;
                --large-compare N: snapshots and the check off vs on at bench restart's large state (pipeline --state-compare --large-state)
  restart       journal.Start on a large state (accounts, resting orders, pending transfers, binary markets): time to ready
  wrk-check     our load generator vs wrk on the same hello-world target (rate, p50, p99, ratios)
  merge         merge several bench all outputs into one report of per-row medians
  all           a short run of every scenario: report.json, report.md and plots in --out

run "bench <scenario> -h" for its flags
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "pipeline":
		return runPipeline(args[1:], stdout, stderr)
	case "http":
		return runHTTP(args[1:], stdout, stderr)
	case "transfer":
		return runTransfer(args[1:], stdout, stderr)
	case "processor":
		return runProcessor(args[1:], stdout, stderr)
	case "disk-ceiling":
		return runDisk(args[1:], stdout, stderr)
	case "replay":
		return runReplay(args[1:], stdout, stderr)
	case "http-ceiling":
		return runHTTPCeiling(args[1:], stdout, stderr)
	case "sweep":
		return runSweep(args[1:], stdout, stderr)
	case "pg-baseline":
		return runPGBaseline(args[1:], stdout, stderr)
	case "all":
		return runAll(args[1:], stdout, stderr)
	case "merge":
		return runMerge(args[1:], stdout, stderr)
	case "ws":
		return runWS(args[1:], stdout, stderr)
	case "ws-clients":
		return runWSClients(args[1:], stdout, stderr)
	case "sink":
		return runSink(args[1:], stdout, stderr)
	case "wrk-check":
		return runWrkCheck(args[1:], stdout, stderr)
	case "state":
		return runStateBench(args[1:], stdout, stderr)
	case "restart":
		return runRestartBench(args[1:], stdout, stderr)
	case "p2p":
		return runP2P(args[1:], stdout, stderr)
	case "replication":
		return runReplication(args[1:], stdout, stderr)
	case "hello-server":
		return runHelloServer(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "bench: unknown scenario %q\n%s", args[0], usage)
	return exitUsage
}

func runPipeline(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench pipeline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg       bench.PipelineConfig
		seed      uint64
		asJSON    bool
		cpuprof   string
		traceFile string
	)
	fs.StringVar(&cfg.Dir, "data", "", "data dir (required; must hold no WAL yet)")
	fs.IntVar(&cfg.Commands, "commands", 1_000_000, "commands to submit")
	fs.IntVar(&cfg.Producers, "producers", 4, "producer goroutines")
	fs.IntVar(&cfg.Batch, "batch", bench.DefaultBatch, "seqs claimed per SubmitFunc call")
	fs.Uint64Var(&seed, "seed", 1, "workload seed")
	fs.BoolVar(&asJSON, "json", false, "print the report as one JSON line")
	fs.IntVar(&cfg.Warmup, "warmup", bench.DefaultWarmup, "commands after setup excluded from the latency histogram (-1 = none)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open-loop offered load in commands/s (0 = closed loop)")
	fs.IntVar(&cfg.Workload.Users, "users", bench.DefaultUsers, "funded users")
	fs.IntVar(&cfg.Workload.Markets, "markets", 2, "markets traded (1 or 2)")
	fs.IntVar(&cfg.Workload.SeedPerBook, "seed-per-book", bench.DefaultSeedPerBook, "resting orders seeded per book")
	fs.IntVar(&cfg.Journal.RingSize, "ring", 0, "journal ring size (power of two; 0 = journal default): bounds commands in flight")
	fs.IntVar(&cfg.Journal.MaxBatch, "max-batch", 0, "journal group-commit limit, commands per fsync (0 = journal default)")
	fs.IntVar(&cfg.Journal.SegmentSize, "segment-size", 0, "WAL segment size in bytes (0 = journal default)")
	fs.BoolVar(&cfg.Journal.NoSync, "nosync", false, "skip fsync (NOT durable; for comparison only)")
	fs.BoolVar(&cfg.Journal.ReadView, "read-view", false, "keep the read view's replica, as the exchange does")
	fs.BoolVar(&cfg.Journal.RealtimeProcessor, "realtime-processor", false, "run the processor on a real-time thread (SCHED_FIFO 1; the exchange's --realtime-processor)")
	fs.DurationVar(&cfg.Check.Interval, "check-interval", 0, "run the periodic full invariant check at this interval (0 = off; the exchange's --core-check-interval)")
	var replica string
	fs.StringVar(&replica, "check-replica", "view", "replica of the periodic check: view (needs --read-view), follower or state (the state follower)")
	var snapEvery uint64
	fs.Uint64Var(&snapEvery, "snapshot-every", 0, "commands between snapshots (0 = the journal's default)")
	fs.BoolVar(&cfg.Journal.NoSnapshots, "no-snapshots", false, "run no state follower: no snapshots (the \"off\" runs of --state-compare; with --trace, to compare one run of each)")
	var stateCompare int
	fs.IntVar(&stateCompare, "state-compare", 0, "run N rounds with snapshots and the check off, then on (the state follower: --snapshot-every, --check-interval or 100ms), interleaved, and print pauses, ack percentiles and ratios (issue 39; subdirs of --data)")
	large := largeStateFlags(fs, false)
	var compare int
	fs.IntVar(&compare, "check-compare", 0, "run N rounds of the same run with the check off, on the view and on a follower, interleaved, and print the rates and ratios (subdirs of --data)")
	fs.StringVar(&cpuprof, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&traceFile, "trace", "", "write a runtime execution trace of the run to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 || cfg.Dir == "" {
		fmt.Fprintln(stderr, "bench pipeline: --data DIR is required and no positional arguments are allowed")
		fs.Usage()
		return exitUsage
	}
	cfg.Seed = seed
	switch replica {
	case "view":
		cfg.Check.Replica = journal.CheckOnView
	case "follower":
		cfg.Check.Replica = journal.CheckOnFollower
	case "state":
		cfg.Check.Replica = journal.CheckOnState
	default:
		fmt.Fprintln(stderr, "bench pipeline: --check-replica must be view, follower or state")
		return exitUsage
	}
	cfg.Journal.SnapshotEvery = snapEvery
	cfg.Large = large()
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if compare > 0 {
		return compareCheck(cfg, compare, stdout, stderr)
	}
	if stateCompare > 0 {
		return compareState(cfg, stateCompare, stdout, stderr)
	}
	cfg.Progress = func(acked core.Seq) { fmt.Fprintf(stderr, "acked %d\n", acked) }

	stop, err := bench.StartCPUProfile(cpuprof)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitFail
	}
	stopTrace, err := bench.StartTrace(traceFile)
	if err != nil {
		_ = stop()
		fmt.Fprintln(stderr, "bench:", err)
		return exitFail
	}
	res, err := bench.RunPipeline(cfg)
	if terr := stopTrace(); err == nil {
		err = terr
	}
	if perr := stop(); err == nil {
		err = perr
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitFail
	}
	if cfg.Large != nil {
		fmt.Fprintln(stderr, largeLine(res))
		if !cfg.Journal.NoSnapshots {
			fmt.Fprintf(stderr, "state follower at the last ack: %d commands behind, %d snapshots written by then; caught up %v later (not measured)\n",
				res.StateLag, res.SnapshotsInRun, res.CatchUp.Round(time.Millisecond))
		}
	}
	if asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return exitFail
		}
		fmt.Fprintf(stderr, "latency measured from seq %d (setup and warm-up excluded)\n", res.LatencyFromSeq)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintf(stdout, "commands      %d\nlast_seq      %d\ncmds_per_sec  %.0f\nack_p50_us    %.1f\n"+
		"ack_p99_us    %.1f\nack_p999_us   %.1f\nack_max_us    %.1f\nlatency_from  seq %d\nelapsed       %v\nstate_hash    %s\n"+
		"max_apply_us  %.1f\nsnapshots     %d (last: serialize %.1f ms, write %.1f ms, %d bytes)\n",
		res.Commands, res.LastSeq, res.CmdsPerSec, res.AckP50us, res.AckP99us, res.AckP999us, res.AckMaxUs, res.LatencyFromSeq,
		res.Elapsed.Round(1e6), res.StateHash, res.MaxApplyUs, res.Snapshots, res.SnapSerializeMs, res.SnapWriteMs, res.SnapBytes)
	return exitOK
}
