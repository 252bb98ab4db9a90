package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/ubscore/ubscore/bench"
)

// DefaultSweepFractions are the offered loads of a sweep, as fractions of
// the measured closed-loop maximum.
const defaultSweepFractions = "0.1,0.25,0.5,0.75,0.9,1.0,1.1,1.2"

// sweepPoint is one offered load of the sweep.
type sweepPoint struct {
	Fraction float64          `json:"fraction"` // of max_rps
	Result   bench.HTTPResult `json:"result"`   // open loop; latencies corrected for coordinated omission
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
	fracs, err := floatList(*fractions)
	if err != nil || (*target != "exchange" && *target != "hello") || lf.rate != 0 {
		fmt.Fprintln(stderr, "bench sweep: --fractions is a list of numbers > 0, --target exchange|hello, no --rate")
		return exitUsage
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "bench sweep:", err); return exitFail }
	load := helloLoad
	if *target == "exchange" {
		x, err := startExchange(*exe, *pgURL, *users)
		if err != nil {
			return fail(err)
		}
		defer x.stop()
		load = func(cfg bench.HTTPConfig) (bench.HTTPResult, error) {
			r, _, err := x.load(cfg)
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
		rep.Points = append(rep.Points, sweepPoint{Fraction: f, Result: r})
		fmt.Fprintf(stderr, "sweep: %3.0f%% offered %8.0f achieved %8.0f p50 %6.0f p99 %7.0f p99.9 %7.0f us\n",
			f*100, cfg.Rate, r.RPS, r.P50us, r.P99us, r.P999us)
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
