// Command bench runs the benchmark scenarios of package bench.
//
//	bench pipeline --data DIR [--commands N] [--producers P] [--seed S] [--batch B] [--json]
//	               [--users U] [--markets M] [--seed-per-book K] [--nosync] [--cpuprofile FILE]
//
// pipeline starts the journal pipeline (WAL + fsync + processor + release of acks)
// on an empty data dir, drives N workload commands into it from P producer
// goroutines (each claiming B seqs at a time through SubmitFunc), waits until
// all are acknowledged, closes the pipeline and reports.
//
// Output streams: while it runs, "acked <seq>" (the highest acknowledged
// seq) goes to stderr every 100 ms, and once more at the end, together with
// journal warnings. stdout carries only the report: with --json exactly one
// JSON line
//
//	{"commands":N,"last_seq":N,"cmds_per_sec":X,"ack_p50_us":X,"ack_p99_us":X,"ack_p999_us":X,"state_hash":"..."}
//
// Command time is fixed, so the same seed (and options) always gives the same
// state_hash, which `replay verify --data DIR` must reproduce. The whole WAL is
// kept (no front truncation) so replay can start from seq 1.
//
//	bench transfer [--pg-url URL] [--users U] [--clients C] [--pool P] [--duration D] [--warmup W]
//	               [--modes naive,fsm] [--max-batch B] [--writers N] [--json] [--cpuprofile FILE]
//
// transfer creates database ubs_bench_<random> on the Postgres server at
// --pg-url, migrates and seeds it, runs C closed-loop clients of internal
// transfers for each mode (the naive one-transaction ledger, the transfer
// FSM on its one path: batched, fused steps) and drops the database. The
// report (one JSON line with --json) gives each mode's committed
// transfers/s and p50/p99/p99.9 latency, and the ratios of fsm to naive.
//
// Exit status: 0 on success, 1 on a failure (message on stderr), 2 on bad usage.
package main

import (
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
