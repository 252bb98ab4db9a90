package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ubscore/ubscore/bench"
)

// This file holds the in-process scenarios that need no server: processor
// (the core alone), disk-ceiling (the data dir's fsync ceiling) and replay
// (restart cost).

// printJSON writes v as one JSON line.
func printJSON(stdout, stderr io.Writer, name string, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(stderr, "bench %s: %v\n", name, err)
		return exitFail
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return exitOK
}

func runProcessor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench processor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.ProcessorConfig
	fs.IntVar(&cfg.Commands, "commands", 2_000_000, "steady commands to apply (timed)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "workload seed")
	fs.IntVar(&cfg.Workload.Users, "users", bench.DefaultUsers, "funded users")
	fs.IntVar(&cfg.Workload.SeedPerBook, "seed-per-book", bench.DefaultSeedPerBook, "resting orders seeded per book")
	asJSON := fs.Bool("json", false, "print the report as one JSON line")
	shape := fs.String("shape", "mixed", "workload: mixed (the workload above), book (the public-benchmark-shaped flow, vs a bare FIFO book) "+
		"or binary (binary YES/NO markets, vs mixed in the same run; --commands per side per run, --users, --seed-per-book, --runs, --seed)")
	var sh shapeFlags
	sh.define(fs)
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	switch *shape {
	case "book":
		return runProcessorShape(fs, &sh, *asJSON, stdout, stderr)
	case "binary":
		return runProcessorBinary(fs, cfg, sh.runs, *asJSON, stdout, stderr)
	case "mixed":
	default:
		fmt.Fprintln(stderr, "bench processor: --shape is mixed, book or binary")
		return exitUsage
	}
	res, err := bench.RunProcessor(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bench processor:", err)
		return exitFail
	}
	if *asJSON {
		return printJSON(stdout, stderr, "processor", res)
	}
	fmt.Fprintf(stdout, "commands      %d\ncmds_per_sec  %.0f\nns_per_cmd    %.1f\nvs target     %.2f of %.0f\n"+
		"rejected      %d\nstate_hash    %s\n", res.Commands, res.CmdsPerSec, res.NsPerCmd, res.Ratio, res.Target,
		res.Rejected, res.StateHash)
	return exitOK
}

// intList parses "1,16,64".
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func runDisk(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench disk-ceiling", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.DiskConfig
	fs.StringVar(&cfg.Dir, "data", "", "a directory on the disk to measure (required; files are created and removed)")
	batches := fs.String("batches", joinInts(bench.DiskBatches), "records per fdatasync, comma-separated")
	fs.DurationVar(&cfg.PerBatch, "duration", 2*time.Second, "measured time per batch size")
	fs.IntVar(&cfg.RecordSize, "record-size", 0, "bytes per record (0 = the workload's mean WAL frame)")
	asJSON := fs.Bool("json", false, "print the report as one JSON line")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	var err error
	if cfg.Batches, err = intList(*batches); err != nil || cfg.Dir == "" {
		fmt.Fprintln(stderr, "bench disk-ceiling: --data DIR is required and --batches is a list of integers")
		return exitUsage
	}
	res, err := bench.RunDisk(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bench disk-ceiling:", err)
		return exitFail
	}
	if *asJSON {
		return printJSON(stdout, stderr, "disk-ceiling", res)
	}
	fmt.Fprintf(stdout, "record size %d bytes\n%8s %12s %10s %8s %10s %10s\n", res.RecordSize,
		"batch", "records/s", "fsyncs/s", "MB/s", "p50 us", "p99 us")
	for _, p := range res.Points {
		fmt.Fprintf(stdout, "%8d %12.0f %10.1f %8.1f %10.1f %10.1f\n", p.Batch, p.RecordsPerS, p.FsyncsPerS, p.MBPerS,
			p.FsyncP50us, p.FsyncP99us)
	}
	return exitOK
}

func runReplay(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.ReplayConfig
	fs.StringVar(&cfg.Dir, "data", "", "empty data dir to prepare and recover (empty: a temp dir, removed after)")
	fs.IntVar(&cfg.Commands, "commands", 1_000_000, "commands in the WAL after the snapshot")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "workload seed")
	fs.IntVar(&cfg.Workload.Users, "users", bench.DefaultUsers, "funded users")
	fs.IntVar(&cfg.Workload.SeedPerBook, "seed-per-book", bench.DefaultSeedPerBook, "resting orders seeded per book")
	asJSON := fs.Bool("json", false, "print the report as one JSON line")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "ubs-bench-replay-")
		if err != nil {
			fmt.Fprintln(stderr, "bench replay:", err)
			return exitFail
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	res, err := bench.RunReplay(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bench replay:", err)
		return exitFail
	}
	if *asJSON {
		return printJSON(stdout, stderr, "replay", res)
	}
	fmt.Fprintf(stdout, "snapshot        seq %d (%d bytes), loaded in %.4f s\nreplayed        %d commands\n"+
		"restart         %.4f s\ncmds_per_sec    %.0f (replay alone %.0f)\nvs target       %.2f of %.0f\nstate_hash      %s\n",
		res.SnapshotSeq, res.SnapshotBytes, res.SnapshotLoadS, res.Commands, res.RestartS, res.CmdsPerSec,
		res.ReplayPerSec, res.Ratio, res.Target, res.StateHash)
	return exitOK
}
