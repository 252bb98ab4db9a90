package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/replication/natstest"
)

// runReplication is `bench replication`: durable throughput and ack latency
// with sync replication (a JetStream stream of --nodes replicas on a NATS
// cluster in this process) beside the local WAL alone, same run, and a
// standby's lag behind the primary at full rate.
func runReplication(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench replication", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.ReplicationConfig
	asJSON := fs.Bool("json", false, "print the report as one JSON line")
	fs.IntVar(&cfg.Commands, "commands", 200_000, "commands per run")
	fs.IntVar(&cfg.Producers, "producers", 4, "producer goroutines")
	fs.IntVar(&cfg.Rounds, "rounds", 3, "alternating local / sync runs per load (medians)")
	fs.IntVar(&cfg.Nodes, "nodes", 3, "NATS nodes and stream replicas")
	fs.BoolVar(&cfg.Procs, "nats-procs", natstest.Binary() != "",
		"run the NATS nodes as nats-server processes (a deployment's shape: their own runtimes and CPU) instead of inside this process; on by default when a nats-server binary is found")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "workload seed")
	fs.IntVar(&cfg.Workload.Users, "users", bench.DefaultUsers, "funded users")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	res, err := bench.RunReplication(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bench replication:", err)
		return exitFail
	}
	if *asJSON {
		return printJSON(stdout, stderr, "replication", res)
	}
	fmt.Fprintf(stdout, "nodes / replicas   %d\ncommands per run   %d\n"+
		"closed loop        local %.0f cmd/s   sync %.0f cmd/s   sync/local %.3f (target >= 0.5)\n"+
		"half load %.0f/s   ack p50 local %.0f us sync %.0f us   p99 local %.0f us sync %.0f us   delta %.0f us\n"+
		"                   delta per round (its sync run beside its local run), median %.0f us\n"+
		"                   sync on any node (not moved to the leader): p99 %.0f us, delta %.0f us\n"+
		"sync's half load   %.0f/s (half of sync's maximum; local at the same rate)   ack p50 local %.0f us sync %.0f us   p99 local %.0f us sync %.0f us\n"+
		"                   delta %.0f us, per round %.0f us (target <= 2000)\n"+
		"the log alone      %.0f records/s of %.0f B (sync's at that load), no pipeline: store p50 %.0f us p99 %.0f us\n"+
		"sync, half load    log store p50 %.0f us p99 %.0f us; wait for the log after the fsync p50 %.0f us p99 %.0f us;\n"+
		"                   group commit (send, write, fsync) p50 %.0f us p99 %.0f us; appends in flight p99 %.0f\n"+
		"cpu per command    local %.1f us   sync %.1f us (pipeline, NATS nodes, producers; the NATS processes' part %.1f us)\n"+
		"with a standby     %.0f cmd/s, lag max %.0f commands, caught up %.1f ms after the last ack\n"+
		"NATS processes     %v; loadavg at the end %s\n",
		res.Nodes, res.Commands, res.LocalRate, res.SyncRate, res.RateRatio, res.HalfRate,
		res.LocalP50us, res.SyncP50us, res.LocalP99us, res.SyncP99us, res.P99DeltaUs, res.P99DeltaPairedUs,
		res.AnyNodeP99us, res.AnyNodeP99DeltaUs,
		res.OwnHalfRate, res.OwnHalfLocalP50us, res.OwnHalfSyncP50us, res.OwnHalfLocalP99us, res.OwnHalfSyncP99us,
		res.OwnHalfP99DeltaUs, res.OwnHalfP99DeltaPairedUs,
		res.FloorRecordRate, res.FloorRecordBytes, res.FloorStoreP50us, res.FloorStoreP99us,
		res.StoreP50us, res.StoreP99us, res.LogWaitP50us, res.LogWaitP99us,
		res.GroupCommitP50, res.GroupCommitP99, res.InFlightP99,
		res.LocalCPUus, res.SyncCPUus, res.SyncNATSCPUus,
		res.StandbyRunRate, res.StandbyLagMax, res.StandbyCatchUpMs, res.Procs, res.LoadAvg)
	return exitOK
}
