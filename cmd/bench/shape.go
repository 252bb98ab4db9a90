package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/bench/bookshape"
)

// shapeFlags are `bench processor --shape book`'s own flags.
type shapeFlags struct {
	scenarios, accounts string
	orders, runs        int
}

func (f *shapeFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.scenarios, "scenario", "all", "book shape: normal, wide-swing, flash-crash or all (comma-separated)")
	fs.StringVar(&f.accounts, "accounts", "8000,1000000", "book shape: funded accounts per comparison, comma-separated (>= 1000000: one per order)")
	fs.IntVar(&f.orders, "orders", bookshape.DefaultOrders, "book shape: new orders per flow (~2.1 messages each)")
	fs.IntVar(&f.runs, "runs", 5, "book and binary shapes: runs per comparison (the report takes medians)")
}

// runProcessorShape is `bench processor --shape book`: the full processor
// vs the bare FIFO book on the same flow, per scenario and account count.
// Its seed is bench.ShapeSeed unless --seed is given.
func runProcessorShape(fs *flag.FlagSet, f *shapeFlags, asJSON bool, stdout, stderr io.Writer) int {
	cfg := bench.ShapeSetConfig{Orders: f.orders, Runs: f.runs, Seed: bench.ShapeSeed}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "seed" {
			cfg.Seed = fl.Value.(flag.Getter).Get().(uint64)
		}
	})
	if f.scenarios == "all" {
		cfg.Scenarios = bookshape.Scenarios
	} else {
		for _, name := range strings.Split(f.scenarios, ",") {
			sc, ok := bookshape.ParseScenario(strings.TrimSpace(name))
			if !ok {
				fmt.Fprintf(stderr, "bench processor: unknown scenario %q\n", name)
				return exitUsage
			}
			cfg.Scenarios = append(cfg.Scenarios, sc)
		}
	}
	var err error
	if cfg.Accounts, err = intList(f.accounts); err != nil {
		fmt.Fprintln(stderr, "bench processor: --accounts is a list of integers")
		return exitUsage
	}
	rep, err := bench.RunShapeSet(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bench processor:", err)
		return exitFail
	}
	if asJSON {
		return printJSON(stdout, stderr, "processor", rep)
	}
	fmt.Fprintf(stdout, "%-12s %9s %10s %14s %14s %7s %12s %12s\n", "scenario", "accounts", "messages", "proc msgs/s",
		"book msgs/s", "ratio", "allocs/msg", "steady")
	for _, r := range rep.Results {
		fmt.Fprintf(stdout, "%-12s %9d %10d %14.0f %14.0f %7.3f %12.6f %12.6f\n", r.Scenario, r.Accounts, r.Messages,
			r.ProcPerSec, r.BookPerSec, r.Ratio, r.ProcAllocsMsg, r.SteadyPerMsg)
	}
	fmt.Fprintf(stdout, "worst ratio %.3f (%s, %d accounts); medians of %d runs, %s\n", rep.MinRatio,
		rep.Results[rep.Worst].Scenario, rep.Results[rep.Worst].Accounts, f.runs, bench.ThreadClockName)
	return exitOK
}

// shapePairs are the report's rows of `processor --shape book`: per account
// count, the full processor against the bare book in its worst scenario.
func shapePairs(e *allEnv) []pair {
	var rep bench.ShapeReport
	if !e.result("processor-shape", &rep) {
		p := pair{Name: "processor vs bare book (book shape)", Unit: "msg/s", CeilingName: "bare FIFO book, same run"}
		if s := e.scenario["processor-shape"]; s != nil {
			p.Note = "processor-shape: " + firstOf(s.Skipped, s.Error)
		}
		return []pair{p}
	}
	var out []pair
	worst := map[int]int{} // accounts -> index of its lowest ratio
	var order []int
	for i, r := range rep.Results {
		j, ok := worst[r.Accounts]
		if !ok {
			order = append(order, r.Accounts)
		}
		if !ok || r.Ratio < rep.Results[j].Ratio {
			worst[r.Accounts] = i
		}
	}
	for _, acc := range order {
		r := rep.Results[worst[acc]]
		p := pair{Name: fmt.Sprintf("processor vs bare book (book shape, %d accounts)", acc), Unit: "msg/s",
			Value: r.ProcPerSec, Ceiling: r.BookPerSec, Ratio: r.Ratio,
			CeilingName: fmt.Sprintf("bare FIFO book, same run (worst scenario: %s)", r.Scenario),
			Note:        fmt.Sprintf("medians of %d runs, %s; %.6f allocs/msg", r.Runs, r.Clock, r.ProcAllocsMsg)}
		out = append(out, p)
	}
	return out
}
