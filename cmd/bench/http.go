package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/bench"
)

// httpReport is the one-line JSON report of the http scenario.
type httpReport struct {
	Baseline   bench.HTTPResult `json:"baseline"`              // fasthttp hello-world POST with JSON parsing
	Exchange   bench.HTTPResult `json:"exchange"`              // POST /api/v1/order with durable ack
	Ratio      float64          `json:"ratio"`                 // exchange rps / baseline rps
	SinkLagMax float64          `json:"sink_lag_max_commands"` // max of ubs_sink_lag_commands sampled every 100 ms
	SinkLagSec float64          `json:"sink_lag_max_seconds"`  // the same, converted at the measured command rate
	// WAL is what the exchange's WAL did in its measured window: group
	// commits, their size and their write+fdatasync time (absent if its
	// /metrics did not answer).
	WAL *walWindow `json:"exchange_wal,omitempty"`
	// Rounds holds every round's ratio (--rounds); Baseline, Exchange,
	// Ratio and WAL are those of the round of median ratio.
	Rounds []float64 `json:"rounds,omitempty"`
}

// httpFlags are the load flags shared by http and http-ceiling.
type httpFlags struct {
	conns     int
	dur, warm time.Duration
	rate      float64
	engine    string
	threads   int
	asJSON    bool
}

// register adds the flags; a command with another default for --conns
// sets f.conns first (else 64).
func (f *httpFlags) register(fs *flag.FlagSet) {
	conns := 64
	if f.conns > 0 {
		conns = f.conns
	}
	fs.IntVar(&f.conns, "conns", conns, "concurrent keep-alive connections")
	fs.DurationVar(&f.dur, "duration", 10*time.Second, "measured time per target")
	fs.DurationVar(&f.warm, "warmup", 2*time.Second, "unmeasured warm-up per target")
	fs.Float64Var(&f.rate, "rate", 0, "open-loop offered load in requests/s (0 = closed loop)")
	fs.StringVar(&f.engine, "engine", bench.EngineEvloop, `load generator: "evloop" (wrk's design: --threads epoll loops on OS threads; Linux, else fasthttp) or "fasthttp" (a goroutine per connection)`)
	fs.IntVar(&f.threads, "threads", 0, "evloop: event loops (OS threads), as wrk -t; 0 = GOMAXPROCS")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as one JSON line")
}

// settleProcs fixes the event loops (--threads 0: GOMAXPROCS, as before)
// and, for the evloop engine, runs the process with one P more than loops:
// the configuration wrk-check validates against wrk (the extra P runs
// timers and GC, so the loops wait in epoll without the scheduler's
// syscall hand-off). It returns the function that restores GOMAXPROCS.
func (f *httpFlags) settleProcs() (restore func()) {
	if f.threads == 0 {
		f.threads = runtime.GOMAXPROCS(0)
	}
	if f.engine != bench.EngineEvloop {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(f.threads + 1)
	return func() { runtime.GOMAXPROCS(prev) }
}

func (f *httpFlags) config() bench.HTTPConfig {
	return bench.HTTPConfig{Conns: f.conns, Duration: f.dur, Warmup: f.warm, Rate: f.rate, Engine: f.engine, Threads: f.threads}
}

// parseFlags parses args into fs; it returns -1 to go on, else the exit code.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "%s: no positional arguments are allowed\n", fs.Name())
		return exitUsage
	}
	return -1
}

// runHTTP measures POST /api/v1/order on the real exchange binary against
// a fasthttp hello-world POST that parses the same JSON, in the same run,
// with the same load generator.
func runHTTP(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench http", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lf httpFlags
	lf.register(fs)
	exe := fs.String("exchange", "bin/exchange", "the exchange binary")
	pgURL := fs.String("pg-url", "", "Postgres URL for the exchange's sink (empty: the exchange's default)")
	users := fs.Int("users", 64, "trading users")
	rounds := fs.Int("rounds", 1, "alternate hello-world and exchange loads this many times; report the round of median ratio")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	defer lf.settleProcs()()
	if *rounds < 1 {
		fmt.Fprintln(stderr, "bench http: --rounds must be >= 1")
		return exitUsage
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "bench http:", err); return exitFail }

	x, err := startExchange(*exe, *pgURL, *users)
	if err != nil {
		return fail(err)
	}
	defer x.stop()
	// Rounds alternate the two targets, so a change in the machine's load
	// (shared hosts) hits both sides of a ratio alike; the report is the
	// round of median ratio (the lower median of an even count), with the
	// worst sink lag of all rounds.
	var all []httpReport
	for r := 0; r < *rounds; r++ {
		if r > 0 { // the sink's backlog of the last exchange round must not load the next baseline
			if waited := x.settleSink(sweepSettleLag, sweepSettleMax); waited > 0 && *rounds > 1 {
				fmt.Fprintf(stderr, "bench http: waited %.1f s for the sink's backlog\n", waited)
			}
		}
		base, err := helloLoad(lf.config())
		if err != nil {
			return fail(err)
		}
		ex, lagMax, wal, err := x.load(lf.config())
		if err != nil {
			return fail(err)
		}
		rr := httpReport{Baseline: base, Exchange: ex, SinkLagMax: lagMax, WAL: wal}
		if base.RPS > 0 {
			rr.Ratio = ex.RPS / base.RPS
		}
		if ex.RPS > 0 {
			rr.SinkLagSec = lagMax / ex.RPS
		}
		if *rounds > 1 {
			fmt.Fprintf(stderr, "bench http round %d: baseline %.0f req/s, exchange %.0f req/s, ratio %.2f\n", r+1, base.RPS, ex.RPS, rr.Ratio)
		}
		all = append(all, rr)
	}
	byRatio := slices.Clone(all)
	slices.SortFunc(byRatio, func(a, b httpReport) int { return cmp.Compare(a.Ratio, b.Ratio) })
	rep := byRatio[(len(byRatio)-1)/2]
	for _, rr := range all {
		rep.Rounds = append(rep.Rounds, rr.Ratio)
		rep.SinkLagMax, rep.SinkLagSec = max(rep.SinkLagMax, rr.SinkLagMax), max(rep.SinkLagSec, rr.SinkLagSec)
	}
	if path := os.Getenv("UBS_BENCH_METRICS"); path != "" { // keep the exchange's final /metrics
		if st, b, err := fasthttp.GetTimeout(nil, "http://"+x.addr+"/metrics", 5*time.Second); err == nil && st == 200 {
			_ = os.WriteFile(path, b, 0o644)
		}
	}
	if lf.asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	printHTTP(stdout, "baseline", rep.Baseline)
	printHTTP(stdout, "exchange", rep.Exchange)
	if rep.WAL != nil {
		fmt.Fprintf(stdout, "%-9s WAL: %s\n", "", rep.WAL)
	}
	if rep.Exchange.FirstBody != "" {
		fmt.Fprintf(stdout, "first non-2xx: %s\n", rep.Exchange.FirstBody)
	}
	fmt.Fprintf(stdout, "ratio     %.2f\nsink lag  max %.0f commands (~%.3f s)\n", rep.Ratio, rep.SinkLagMax, rep.SinkLagSec)
	return exitOK
}

// runHTTPCeiling measures the hello-world target alone: the most this
// machine's HTTP stack and JSON decoding allow with this load generator.
func runHTTPCeiling(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench http-ceiling", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lf httpFlags
	lf.register(fs)
	addr := fs.String("addr", "", "load a hello-world target already running at this host:port (`bench hello-server`) instead of starting one")
	fixed := fs.Bool("fixed-body", false, "send one fixed order body (as wrk-check's wrk does) instead of varying side and price")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the load (this process: the generator, and the target with --server inprocess) to this file")
	server := fs.String("server", "process", `where the harness starts the hello-world target: "process" (a child process, like the exchange) or "inprocess" (in this process, sharing its Go scheduler)`)
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	defer lf.settleProcs()()
	var (
		res bench.HTTPResult
		err error
	)
	stopProfile, err := bench.StartCPUProfile(*cpuProfile)
	if err != nil {
		fmt.Fprintln(stderr, "bench http-ceiling:", err)
		return exitFail
	}
	defer func() { _ = stopProfile() }()
	cfg := lf.config()
	if *fixed {
		cfg.Request = fixedOrderBody
	}
	switch {
	case *addr != "":
		res, err = helloLoadAt(*addr, cfg)
	case *server == "process":
		res, err = helloLoad(cfg)
	case *server == "inprocess":
		res, err = helloLoadInProcess(cfg)
	default:
		fmt.Fprintln(stderr, "bench http-ceiling: --server is process or inprocess")
		return exitUsage
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench http-ceiling:", err)
		return exitFail
	}
	if lf.asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	printHTTP(stdout, "hello", res)
	return exitOK
}

func printHTTP(w io.Writer, name string, r bench.HTTPResult) {
	fmt.Fprintf(w, "%-9s %8.0f req/s  p50 %6.0f us  p99 %6.0f us  non-2xx %d errors %d\n",
		name, r.RPS, r.P50us, r.P99us, r.Non2xx, r.Errors)
	if c := r.CPU; c != nil {
		fmt.Fprintf(w, "%-9s CPU per request: generator %.1f us, server %.1f us, postgres %.1f us, other %.1f us, idle %.1f us (total %.1f)\n",
			"", c.Generator, c.Server, c.Postgres, c.Other, c.Idle, c.Total())
	}
}

func waitReady(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		st, _, err := fasthttp.GetTimeout(nil, "http://"+addr+"/health/ready", time.Second)
		if err == nil && st == 200 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("exchange at %s not ready within %v", addr, within)
}

func post(addr, path, token, body string) (int, string) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://" + addr + path)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode(), string(resp.Body())
}

// scrape reads one unlabelled sample from /metrics.
func scrape(addr, name string) (float64, bool) {
	v, ok := scrapeValues(addr, name)[name]
	return v, ok
}

// scrapeValues reads the samples named by keys (a metric name, or a name
// with its labels as /metrics writes them, e.g. x_bucket{le="1"}) from one
// fetch of /metrics; a key missing from the answer is missing from the
// map (nil: no answer).
func scrapeValues(addr string, keys ...string) map[string]float64 {
	text, ok := fetchMetrics(addr)
	if !ok {
		return nil
	}
	return parseSamples(text, keys)
}

// parseSamples picks the samples named by keys out of a /metrics text.
func parseSamples(text string, keys []string) map[string]float64 {
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	out := make(map[string]float64, len(keys))
	eachSample(text, func(key string, v float64) {
		if want[key] {
			out[key] = v
		}
	})
	return out
}

// scrapeBuckets reads the cumulative buckets of an unlabelled histogram
// from /metrics: upper bound ("le") -> count.
func scrapeBuckets(addr, name string) map[string]float64 {
	text, ok := fetchMetrics(addr)
	if !ok {
		return nil
	}
	out := map[string]float64{}
	prefix := name + `_bucket{le="`
	eachSample(text, func(key string, v float64) {
		if rest, ok := strings.CutPrefix(key, prefix); ok {
			if le, ok := strings.CutSuffix(rest, `"}`); ok {
				out[le] = v
			}
		}
	})
	return out
}

// fetchMetrics is the text of the exchange's /metrics (false: no answer).
func fetchMetrics(addr string) (string, bool) {
	st, b, err := fasthttp.GetTimeout(nil, "http://"+addr+"/metrics", time.Second)
	if err != nil || st != 200 {
		return "", false
	}
	return string(b), true
}

// eachSample calls fn with every sample line of a /metrics text: the name
// with its labels as written, and the value (lines whose value does not
// parse, comments included, are skipped).
func eachSample(text string, fn func(key string, v float64)) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			fn(key, v)
		}
	}
}

// slowerThan is how many observations between two scrapes of the same
// histogram exceeded bound (which must be one of its bucket bounds).
func slowerThan(before, after map[string]float64, bound string) float64 {
	if after == nil {
		return 0
	}
	total := after["+Inf"] - before["+Inf"]
	return total - (after[bound] - before[bound])
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
