package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ubscore/ubscore/bench"
)

// DefaultSweepFractions are the offered loads of a sweep, as fractions of
// the measured closed-loop maximum.
const defaultSweepFractions = "0.1,0.25,0.5,0.75,0.9,1.0,1.1,1.2"

// sweepPoint is one offered load of the sweep.
type sweepPoint struct {
	Fraction float64          `json:"fraction"` // of max_rps
	Result   bench.HTTPResult `json:"result"`   // open loop; latencies corrected for coordinated omission
	// The exchange's sink backlog (ubs_sink_lag_commands) when the point
	// started and its maximum during the point: a backlog left by the
	// previous (heavier) point is still being written to Postgres.
	SinkLagStart float64 `json:"sink_lag_start_commands,omitempty"`
	// SettleSec is how long the sweep waited before the point for the
	// sink's backlog to drain (below sweepSettleLag commands).
	SettleSec  float64 `json:"settle_s,omitempty"`
	SinkLagMax float64 `json:"sink_lag_max_commands,omitempty"`
	// WAL group commits (write + fdatasync, ubs_journal_append_seconds)
	// during the point that took over 25 ms and over 100 ms: every
	// command arriving meanwhile waits for them.
	Appends25ms  float64 `json:"wal_appends_over_25ms,omitempty"`
	Appends100ms float64 `json:"wal_appends_over_100ms,omitempty"`
}

// sweepReport is sweep's one-line JSON report.
type sweepReport struct {
	Target string       `json:"target"`  // "exchange" or "hello"
	MaxRPS float64      `json:"max_rps"` // closed-loop rate the fractions refer to
	Points []sweepPoint `json:"points"`
}

// runSweep measures latency against offered load: a closed-loop run finds
// the maximum rate, then open-loop runs offer fractions of it.
func runSweep(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lf httpFlags
	lf.register(fs)
	target := fs.String("target", "exchange", `"exchange" (POST /api/v1/order on --exchange) or "hello" (the hello-world target)`)
	exe := fs.String("exchange", "bin/exchange", "the exchange binary")
	pgURL := fs.String("pg-url", "", "Postgres URL for the exchange's sink (empty: the exchange's default)")
	users := fs.Int("users", 64, "trading users")
	fractions := fs.String("fractions", defaultSweepFractions, "offered loads as fractions of the maximum, comma-separated")
	maxRPS := fs.Float64("max", 0, "the maximum rate (0 = measure it closed-loop first)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	defer lf.settleProcs()()
	fracs, err := floatList(*fractions)
	if err != nil || (*target != "exchange" && *target != "hello") || lf.rate != 0 {
		fmt.Fprintln(stderr, "bench sweep: --fractions is a list of numbers > 0, --target exchange|hello, no --rate")
		return exitUsage
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "bench sweep:", err); return exitFail }
	load := helloLoad
	var lagStart, lagMax, slow25, slow100, settle float64 // of the last load (exchange only)
	if *target == "exchange" {
		x, err := startExchange(*exe, *pgURL, *users)
		if err != nil {
			return fail(err)
		}
		defer x.stop()
		load = func(cfg bench.HTTPConfig) (bench.HTTPResult, error) {
			settle = x.settleSink(sweepSettleLag, sweepSettleMax)
			lagStart, _ = scrape(x.addr, "ubs_sink_lag_commands")
			before := scrapeBuckets(x.addr, "ubs_journal_append_seconds")
			r, lm, _, err := x.load(cfg)
			after := scrapeBuckets(x.addr, "ubs_journal_append_seconds")
			lagMax, slow25, slow100 = lm, slowerThan(before, after, "0.025"), slowerThan(before, after, "0.1")
			return r, err
		}
	}
	rep := sweepReport{Target: *target, MaxRPS: *maxRPS}
	if rep.MaxRPS == 0 {
		r, err := load(lf.config())
		if err != nil {
			return fail(err)
		}
		rep.MaxRPS = math.Round(r.RPS)
	}
	if rep.MaxRPS <= 0 {
		return fail(fmt.Errorf("maximum rate %v", rep.MaxRPS))
	}
	for _, f := range fracs {
		cfg := lf.config()
		cfg.Rate = f * rep.MaxRPS
		r, err := load(cfg)
		if err != nil {
			return fail(err)
		}
		rep.Points = append(rep.Points, sweepPoint{Fraction: f, Result: r, SinkLagStart: lagStart, SinkLagMax: lagMax, SettleSec: settle,
			Appends25ms: slow25, Appends100ms: slow100})
		fmt.Fprintf(stderr, "sweep: %3.0f%% offered %8.0f achieved %8.0f p50 %6.0f p99 %7.0f p99.9 %7.0f us; sink lag %.0f at start, max %.0f; "+
			"WAL appends > 25 ms: %.0f, > 100 ms: %.0f\n", f*100, cfg.Rate, r.RPS, r.P50us, r.P99us, r.P999us, lagStart, lagMax, slow25, slow100)
	}
	if lf.asJSON {
		return printJSON(stdout, stderr, "sweep", rep)
	}
	fmt.Fprintf(stdout, "%s, max %.0f req/s (closed loop)\n%6s %10s %10s %8s %8s %8s %8s\n", rep.Target, rep.MaxRPS,
		"load", "offered", "achieved", "p50 us", "p99 us", "p99.9 us", "raw p99")
	for _, p := range rep.Points {
		r := p.Result
		fmt.Fprintf(stdout, "%5.0f%% %10.0f %10.0f %8.0f %8.0f %8.0f %8.0f\n", p.Fraction*100, r.OfferedRPS, r.RPS,
			r.P50us, r.P99us, r.P999us, r.RawP99us)
	}
	return exitOK
}

// A sweep point starts only once the sink's backlog (left by the
// closed-loop run or a previous overloaded point) is below sweepSettleLag
// commands, or after sweepSettleMax: otherwise a light point is measured
// while the exchange and Postgres are still writing the previous point's
// orders, and reports their cost as its own latency.
const (
	sweepSettleLag = 1000
	sweepSettleMax = 30 * time.Second
)

func floatList(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 || v > 10 {
			return nil, fmt.Errorf("bad fraction %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}
