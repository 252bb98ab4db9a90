package main

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/journal"
)

// compareCheck runs the pipeline scenario rounds times in each of three
// variants, interleaved (off, check on the read view, check on a WAL
// follower; every variant keeps the read view, as the exchange does), each
// run in a fresh subdir of cfg.Dir, and prints every run and the medians
// with their ratios to "off" (docs/operations.md's measurement of the periodic
// check's cost).
func compareCheck(cfg bench.PipelineConfig, rounds int, stdout, stderr io.Writer) int {
	if cfg.Check.Interval <= 0 {
		cfg.Check.Interval = 100 * time.Millisecond
	}
	cfg.Journal.ReadView = true
	cfg.Progress = nil
	type variant struct {
		name string
		on   bool
		rep  journal.CheckReplica
	}
	variants := []variant{{"off", false, 0}, {"view", true, journal.CheckOnView}, {"follower", true, journal.CheckOnFollower}}
	rates := make([][]float64, len(variants))
	for r := 0; r < rounds; r++ {
		for i, v := range variants {
			c := cfg
			c.Dir = filepath.Join(cfg.Dir, fmt.Sprintf("round%d-%s", r, v.name))
			c.Check.Replica = v.rep
			if !v.on {
				c.Check.Interval = 0
			}
			res, err := bench.RunPipeline(c)
			if err != nil {
				fmt.Fprintln(stderr, "bench:", err)
				return exitFail
			}
			rates[i] = append(rates[i], res.CmdsPerSec)
			fmt.Fprintf(stdout, "round %d %-8s cmds_per_sec %9.0f  ack_p99_us %8.1f  ack_max_us %9.1f  checks %3d  check_max_us %8.0f\n",
				r, v.name, res.CmdsPerSec, res.AckP99us, res.AckMaxUs, res.Checks, res.CheckMaxUs)
		}
	}
	med := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for i, v := range variants {
		ratios := make([]float64, rounds)
		for r := range ratios {
			ratios[r] = rates[i][r] / rates[0][r]
		}
		fmt.Fprintf(stdout, "median %-8s cmds_per_sec %9.0f  ratio to off (median of the rounds' ratios) %.3f\n",
			v.name, med(rates[i]), med(ratios))
	}
	return exitOK
}

// compareState runs the pipeline scenario rounds times with snapshots and
// the periodic check off (no state follower) and on (the state follower
// writing a snapshot every cfg.Journal.SnapshotEvery commands and checking
// every cfg.Check.Interval), interleaved, each in a fresh subdir, and prints
// every run and the medians of the processor's longest pause, the ack
// percentiles and the throughput, with their on/off ratios (issue 39 item 3).
// Open loop with --rate, closed loop without. With cfg.Large each run's data
// dir first gets the large state (bench restart's), under the workload.
func compareState(cfg bench.PipelineConfig, rounds int, stdout, stderr io.Writer) int {
	if _, err := runStateCompare(cfg, rounds, stdout); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitFail
	}
	return exitOK
}

// stateCompared is what runStateCompare measured: the medians of the "off"
// and "on" runs and of the rounds' on/off ratios.
type stateCompared struct {
	OffRate, OnRate, RateRatio float64
}

func runStateCompare(cfg bench.PipelineConfig, rounds int, stdout io.Writer) (stateCompared, error) {
	if cfg.Check.Interval <= 0 {
		cfg.Check.Interval = 100 * time.Millisecond
	}
	cfg.Check.Replica = journal.CheckOnState
	cfg.Journal.ReadView = true
	cfg.Progress = nil
	names := []string{"off", "on"}
	res := make([][]bench.PipelineResult, 2)
	for r := 0; r < rounds; r++ {
		for i, name := range names {
			c := cfg
			c.Dir = filepath.Join(cfg.Dir, fmt.Sprintf("state%d-%s", r, name))
			if i == 0 {
				c.Journal.NoSnapshots, c.Check.Interval = true, 0
			}
			x, err := bench.RunPipeline(c)
			if err != nil {
				return stateCompared{}, err
			}
			res[i] = append(res[i], x)
			if cfg.Large != nil {
				fmt.Fprintf(stdout, "round %d %-3s %s\n", r, name, largeLine(x))
				if i == 1 {
					fmt.Fprintf(stdout, "round %d %-3s state follower at the last ack: %d commands behind, %d snapshots written by then; caught up %v later (not measured)\n",
						r, name, x.StateLag, x.SnapshotsInRun, x.CatchUp.Round(time.Millisecond))
				}
			}
			fmt.Fprintf(stdout, "round %d %-3s cmds_per_sec %9.0f  ack_p50_us %7.1f  ack_p99_us %8.1f  ack_p999_us %8.1f  ack_max_us %9.1f  "+
				"max_apply_us %8.1f  snapshots %3d (serialize %.1f ms, write %.1f ms, %d B)  checks %3d (max %.0f us)\n",
				r, name, x.CmdsPerSec, x.AckP50us, x.AckP99us, x.AckP999us, x.AckMaxUs, x.MaxApplyUs, x.Snapshots,
				x.SnapSerializeMs, x.SnapWriteMs, x.SnapBytes, x.Checks, x.CheckMaxUs)
		}
	}
	med := func(f func(bench.PipelineResult) float64, i int) float64 {
		xs := make([]float64, rounds)
		for r := range xs {
			xs[r] = f(res[i][r])
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	ratio := func(f func(bench.PipelineResult) float64) float64 {
		xs := make([]float64, rounds)
		for r := range xs {
			xs[r] = f(res[1][r]) / f(res[0][r])
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	metrics := []struct {
		name string
		f    func(bench.PipelineResult) float64
	}{
		{"cmds_per_sec", func(x bench.PipelineResult) float64 { return x.CmdsPerSec }},
		{"ack_p99_us", func(x bench.PipelineResult) float64 { return x.AckP99us }},
		{"ack_p999_us", func(x bench.PipelineResult) float64 { return x.AckP999us }},
		{"max_apply_us", func(x bench.PipelineResult) float64 { return x.MaxApplyUs }},
	}
	if cfg.Large != nil { // (not in the default output, which stays as it was)
		metrics = slices.Insert(metrics, 1, metrics[0])
		metrics[1].name, metrics[1].f = "ack_p50_us", func(x bench.PipelineResult) float64 { return x.AckP50us }
	}
	for _, m := range metrics {
		fmt.Fprintf(stdout, "median %-13s off %10.1f  on %10.1f  on/off (median of the rounds' ratios) %.3f\n",
			m.name, med(m.f, 0), med(m.f, 1), ratio(m.f))
	}
	if cfg.Large != nil {
		// The "on" runs' last snapshots, of the large state.
		ser, wr, size := make([]float64, 0, rounds), make([]float64, 0, rounds), make([]float64, 0, rounds)
		for _, x := range res[1] {
			if x.Snapshots > 0 {
				ser, wr, size = append(ser, x.SnapSerializeMs), append(wr, x.SnapWriteMs), append(size, float64(x.SnapBytes))
			}
		}
		if len(ser) > 0 {
			slices.Sort(ser)
			slices.Sort(wr)
			slices.Sort(size)
			fmt.Fprintf(stdout, "on: last snapshot of each run (%d runs): %.1f MB, serialize %.1f–%.1f ms (median %.1f), write %.1f–%.1f ms (median %.1f), on the state follower\n",
				len(ser), size[len(size)/2]/(1<<20), ser[0], ser[len(ser)-1], ser[len(ser)/2], wr[0], wr[len(wr)-1], wr[len(wr)/2])
		} else {
			fmt.Fprintln(stdout, "on: no snapshot written (fewer commands than --snapshot-every?)")
		}
	}
	rate := func(x bench.PipelineResult) float64 { return x.CmdsPerSec }
	cpu := func(x bench.PipelineResult) float64 { return x.CPUusPerCmd }
	if med(cpu, 0) > 0 {
		// The CPU budget: with every core busy, throughput follows the CPU
		// per command; in an open loop below saturation it does not.
		fmt.Fprintf(stdout, "median cpu_us_per_cmd off %10.2f  on %10.2f  on/off %.3f: with %d cores saturated, on/off throughput <= off/on CPU = %.3f\n",
			med(cpu, 0), med(cpu, 1), ratio(cpu), runtime.NumCPU(), 1/ratio(cpu))
	}
	return stateCompared{OffRate: med(rate, 0), OnRate: med(rate, 1), RateRatio: ratio(rate)}, nil
}
