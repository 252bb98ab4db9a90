package main

import (
	"fmt"
	"io"
	"path/filepath"
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
