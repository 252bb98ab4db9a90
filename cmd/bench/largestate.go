package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/journal"
)

// largeStateFlags adds --large-state and its sizes to fs (bench pipeline,
// bench state); the returned func, after parsing, is the state to run the
// workload on, or nil without --large-state. The defaults are bench
// restart's state (issue 39): 1M accounts, 1M resting orders in 100
// markets, 100k PENDING transfers, 10 binary markets.
// With always (bench state --large-compare) there is no --large-state:
// the func returns the state.
func largeStateFlags(fs *flag.FlagSet, always bool) func() *bench.LargeState {
	var (
		on = always
		ls bench.LargeState
	)
	if !always {
		fs.BoolVar(&on, "large-state", false, "first write bench restart's large state into each data dir (--large-*), and run the workload on top of it (its own assets, markets and users, ids above the state's); building and starting are not measured")
	}
	fs.IntVar(&ls.Accounts, "large-accounts", 1_000_000, "with --large-state: accounts (spec 003 users with USD)")
	fs.IntVar(&ls.Orders, "large-orders", 1_000_000, "with --large-state: resting orders (one per account)")
	fs.IntVar(&ls.Markets, "large-markets", 100, "with --large-state: spot markets the orders rest in")
	fs.IntVar(&ls.Pending, "large-pending", 100_000, "with --large-state: PENDING spec 003 transfers")
	fs.IntVar(&ls.Binary, "large-binary", 10, "with --large-state: active binary markets")
	return func() *bench.LargeState {
		if !on {
			return nil
		}
		return &ls
	}
}

// largeLine describes the state under a run (PipelineConfig.Large).
func largeLine(x bench.PipelineResult) string {
	return fmt.Sprintf("large state: seq %d, snapshot %.1f MB, built in %v (not measured), journal.Start on it %v (not measured)",
		x.Large.Seq, float64(x.Large.SnapshotBytes)/(1<<20), x.Large.Took.Round(time.Millisecond), x.Start.Round(time.Millisecond))
}

// largeCompare is bench state --large-compare N (issue 39 item 3 at the
// large state, and item 4 with --exchange): bench pipeline --state-compare N
// --large-state closed loop (the throughput ratio), then open loop at half
// the closed loop's "off" rate (the processor's longest pause, the ack
// percentiles and their ratios), then, with --exchange, bench restart on
// the same state (process start to /health/ready).
type largeCompare struct {
	rounds    int
	state     func() *bench.LargeState
	commands  int
	users     int
	seedBook  int
	snapEvery uint64
	check     time.Duration
	rate      float64
	exchange  string
	exArgs    string
}

func (lc *largeCompare) flags(fs *flag.FlagSet) {
	fs.IntVar(&lc.rounds, "large-compare", 0, "instead: item 3 at the large state (--large-*): N rounds of the pipeline's workload on top of it with snapshots and the check off vs on, closed loop then open loop at half the closed loop's \"off\" rate (bench pipeline --state-compare N --large-state); with --exchange, then the restart to ready on that state (bench restart --exchange)")
	lc.state = largeStateFlags(fs, true)
	fs.IntVar(&lc.commands, "large-commands", 600_000, "with --large-compare: the pipeline's commands per run")
	fs.IntVar(&lc.users, "large-users", 100_000, "with --large-compare: the pipeline workload's users (on top of the state's accounts)")
	fs.IntVar(&lc.seedBook, "large-seed-per-book", 20_000, "with --large-compare: the pipeline workload's seeded orders per book")
	fs.Uint64Var(&lc.snapEvery, "large-snapshot-every", 100_000, "with --large-compare: commands between snapshots in the \"on\" runs")
	fs.DurationVar(&lc.check, "large-check-interval", 100*time.Millisecond, "with --large-compare: the periodic full check's interval in the \"on\" runs")
	fs.Float64Var(&lc.rate, "large-rate", 0, "with --large-compare: the open loop's rate (0 = half the closed loop's median \"off\" rate)")
	fs.StringVar(&lc.exchange, "exchange", "", "with --large-compare: path of an exchange binary: also time bench restart --exchange on the large state")
	fs.StringVar(&lc.exArgs, "exchange-args", "", "with --exchange: more flags for the exchange, space separated")
}

func (lc *largeCompare) run(dir string, noSync bool, stdout, stderr io.Writer) int {
	ls := lc.state()
	cfg := bench.PipelineConfig{Commands: lc.commands, Producers: 4, Seed: 1, Large: ls,
		Workload: bench.Options{Users: lc.users, Markets: 2, SeedPerBook: lc.seedBook},
		Check:    journal.CheckerConfig{Interval: lc.check},
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	cfg.Journal.SnapshotEvery, cfg.Journal.NoSync = lc.snapEvery, noSync
	fmt.Fprintf(stdout, "item 3 at the large state: %d accounts, %d resting orders in %d markets, %d PENDING transfers, %d binary markets; "+
		"the pipeline's workload on top (%d commands, %d users, %d seeded per book, 2 markets of its own), snapshots every %d and the check every %v when on\n",
		ls.Accounts, ls.Orders, ls.Markets, ls.Pending, ls.Binary, lc.commands, lc.users, lc.seedBook, lc.snapEvery, lc.check)
	fmt.Fprintln(stdout, "closed loop:")
	c := cfg
	c.Dir = filepath.Join(dir, "closed")
	closed, err := runStateCompare(c, lc.rounds, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitFail
	}
	rate := lc.rate
	if rate <= 0 {
		rate = math.Round(closed.OffRate / 2)
	}
	fmt.Fprintf(stdout, "open loop at %.0f commands/s (half the closed loop's median off rate %.0f):\n", rate, closed.OffRate)
	c = cfg
	c.Dir, c.Rate = filepath.Join(dir, "open"), rate
	if _, err := runStateCompare(c, lc.rounds, stdout); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "closed loop throughput on/off %.3f (off %.0f/s, on %.0f/s)\n", closed.RateRatio, closed.OffRate, closed.OnRate)
	if lc.exchange == "" {
		return exitOK
	}
	rc := bench.RestartConfig{Dir: filepath.Join(dir, "restart"), Accounts: ls.Accounts, Orders: ls.Orders, Markets: ls.Markets,
		Pending: ls.Pending, Binary: ls.Binary, Exchange: lc.exchange, ExchangeArgs: strings.Fields(lc.exArgs),
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	res, err := bench.RunRestart(rc)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitFail
	}
	fmt.Fprintln(stdout, "restart (bench restart --exchange):")
	fmt.Fprintln(stdout, res)
	return exitOK
}
