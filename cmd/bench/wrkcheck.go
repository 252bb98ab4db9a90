package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ubscore/ubscore/bench"
)

// `bench wrk-check` checks the built-in load generator against wrk: both
// load the same hello-world target (a child process, `bench hello-server`)
// with the same connections, the same CPU budget (wrk -t N threads; our
// generator in its own process with N event loops on N OS threads, see
// runOurs), the same request (one
// fixed order body, keep-alive) and the same duration, alternately, and it
// prints both rates and p50/p99 and the ratios ours/wrk. wrk always
// applies a post-hoc coordinated-omission correction to its latencies
// (bench.WrkCorrected); ours are compared after the same correction, and
// their raw values are printed beside.

// wrkBody is the one request body both tools send.
const wrkBody = `{"market":"BTC-USDT","side":"BUY","type":"LIMIT","time_in_force":"GTC","price":"50001","quantity":"0.001"}`

// wrkSample is one run of one tool. wrk corrects its closed-loop latencies
// for coordinated omission after the run (bench.WrkCorrected), so ours are
// compared after the same correction; Raw* are the round trips ours
// measured (what `bench http-ceiling` reports).
type wrkSample struct {
	RPS      float64 `json:"rps"`
	P50us    float64 `json:"p50_us"`
	P99us    float64 `json:"p99_us"`
	RawP50us float64 `json:"raw_p50_us,omitempty"`
	RawP99us float64 `json:"raw_p99_us,omitempty"`
}

// wrkCheckReport is wrk-check's JSON report.
type wrkCheckReport struct {
	Conns    int    `json:"conns"`
	Threads  int    `json:"threads"`
	Engine   string `json:"engine"` // ours: bench.HTTPConfig.Engine
	Duration string `json:"duration"`
	Stall    string `json:"stall,omitempty"` // the target's injected pause, if any
	// Concurrent: both tools ran at the same time (each with Conns), not alternately.
	Concurrent bool        `json:"concurrent,omitempty"`
	Wrk        []wrkSample `json:"wrk"`
	Ours       []wrkSample `json:"ours"`
	WrkMedian  wrkSample   `json:"wrk_median"`
	OurMedian  wrkSample   `json:"ours_median"`
	// Ratios of the medians, ours / wrk.
	RPSRatio float64 `json:"rps_ratio"`
	P50Ratio float64 `json:"p50_ratio"`
	P99Ratio float64 `json:"p99_ratio"`
	Pass     bool    `json:"pass"` // every ratio within wrkTolerance of 1
}

// wrkLevel is one concurrency level of a wrk-check.
type wrkLevel struct{ conns, threads int }

// wrkTolerance is how far ours / wrk may be from 1 for a level to pass:
// "against the hello-world target its measured rate and latency agree
// with wrk within 15%".
const wrkTolerance = 0.15

func runWrkCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench wrk-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	wrk := fs.String("wrk", "wrk", "the wrk binary")
	conns := fs.Int("conns", 32, "connections (both tools)")
	threads := fs.Int("threads", 2, "wrk -t; our generator runs as many event loops (GOMAXPROCS one more), or with --engine fasthttp GOMAXPROCS set to the same")
	levelList := fs.String("conns-list", "", "check several concurrency levels in turn, one table row each: "+
		"comma-separated CONNS or CONNS:THREADS (e.g. 4:1,32:2,256:2; THREADS defaults to --threads); overrides --conns")
	engine := fs.String("engine", bench.EngineEvloop, `our load generator's engine ("evloop" or "fasthttp")`)
	dur := fs.Duration("duration", 3*time.Second, "measured time per run (both tools; neither has a warm-up)")
	runs := fs.Int("runs", 3, "runs of each tool, alternating (wrk first)")
	asJSON := fs.Bool("json", false, "print the report as one JSON line (one per level)")
	stall := fs.Duration("stall", 0, "make the target pause this long every --stall-every (a known tail both tools must report)")
	stallEvery := fs.Duration("stall-every", 100*time.Millisecond, "the period of --stall")
	together := fs.Bool("concurrent", false, "run wrk and ours at the same time (each with --conns and --threads) instead of alternately: "+
		"both then see the same server and the same machine load")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	levels, err := parseLevels(*levelList, *conns, *threads)
	if err != nil || *runs < 1 || *dur < time.Second || (*engine != bench.EngineEvloop && *engine != bench.EngineFasthttp) {
		fmt.Fprintln(stderr, "bench wrk-check: --conns >= --threads >= 1 (each level of --conns-list too), --runs >= 1, --duration >= 1s, --engine evloop|fasthttp")
		return exitUsage
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "bench wrk-check:", err); return exitFail }
	wrkPath, err := exec.LookPath(*wrk)
	if err != nil {
		return fail(fmt.Errorf("wrk not found (apt-get install wrk): %w", err))
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	tmp, err := os.MkdirTemp("", "ubs-wrk-check-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "post.lua")
	lua := "wrk.method = \"POST\"\nwrk.body = '" + wrkBody + "'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"
	if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
		return fail(err)
	}
	var helloArgs []string
	if *stall > 0 {
		helloArgs = []string{"--stall", stall.String(), "--stall-every", stallEvery.String()}
	}
	h, err := startHelloProcess(helloArgs...)
	if err != nil {
		return fail(err)
	}
	defer h.stop()
	var reps []wrkCheckReport
	for _, lv := range levels {
		rep := wrkCheckReport{Conns: lv.conns, Threads: lv.threads, Duration: dur.String(), Engine: *engine, Concurrent: *together}
		if *stall > 0 {
			rep.Stall = stall.String() + " every " + stallEvery.String()
		}
		for i := 0; i < *runs; i++ {
			var (
				w, o       wrkSample
				werr, oerr error
			)
			ours := func() { o, oerr = runOurs(exe, h.addr, *engine, lv.threads, lv.conns, *dur) }
			if *together {
				done := make(chan struct{})
				go func() { defer close(done); w, werr = runWrk(wrkPath, script, h.addr, lv.threads, lv.conns, *dur) }()
				ours()
				<-done
			} else {
				w, werr = runWrk(wrkPath, script, h.addr, lv.threads, lv.conns, *dur)
				if werr == nil {
					ours()
				}
			}
			if err := errors.Join(werr, oerr); err != nil {
				return fail(err)
			}
			rep.Wrk = append(rep.Wrk, w)
			rep.Ours = append(rep.Ours, o)
			fmt.Fprintf(stderr, "wrk-check c%d t%d run %d: wrk %8.0f req/s p50 %6.0f p99 %7.0f us | ours %8.0f req/s p50 %6.0f p99 %7.0f us "+
				"(wrk's correction; raw p50 %6.0f p99 %7.0f us)\n", lv.conns, lv.threads, i+1, w.RPS, w.P50us, w.P99us,
				o.RPS, o.P50us, o.P99us, o.RawP50us, o.RawP99us)
		}
		rep.WrkMedian, rep.OurMedian = medianSample(rep.Wrk), medianSample(rep.Ours)
		rep.RPSRatio = ratio3(rep.OurMedian.RPS, rep.WrkMedian.RPS)
		rep.P50Ratio = ratio3(rep.OurMedian.P50us, rep.WrkMedian.P50us)
		rep.P99Ratio = ratio3(rep.OurMedian.P99us, rep.WrkMedian.P99us)
		rep.Pass = agrees(rep.RPSRatio) && agrees(rep.P50Ratio) && agrees(rep.P99Ratio)
		if *asJSON {
			if code := printJSON(stdout, stderr, "wrk-check", rep); code != exitOK {
				return code
			}
		}
		reps = append(reps, rep)
	}
	if *asJSON {
		return exitOK
	}
	mode := "alternating"
	if *together {
		mode = "concurrently, each with its own connections"
	}
	fmt.Fprintf(stdout, "hello-world, ours = %s engine, %v per run, %d runs each (%s), medians; "+
		"ours after wrk's correction (raw: before it); PASS = every ratio ours/wrk in [%.2f, %.2f]\n",
		*engine, *dur, *runs, mode, 1-wrkTolerance, 1+wrkTolerance)
	fmt.Fprintf(stdout, "%5s %3s | %9s %9s %5s | %7s %7s %7s %5s | %8s %8s %8s %5s | %s\n", "conns", "thr",
		"wrk rps", "ours rps", "ratio", "wrk p50", "ours", "raw", "ratio", "wrk p99", "ours", "raw", "ratio", "verdict")
	for _, r := range reps {
		verdict := "PASS"
		if !r.Pass {
			verdict = "FAIL"
		}
		w, o := r.WrkMedian, r.OurMedian
		fmt.Fprintf(stdout, "%5d %3d | %9.0f %9.0f %5.2f | %7.0f %7.0f %7.0f %5.2f | %8.0f %8.0f %8.0f %5.2f | %s\n",
			r.Conns, r.Threads, w.RPS, o.RPS, r.RPSRatio, w.P50us, o.P50us, o.RawP50us, r.P50Ratio,
			w.P99us, o.P99us, o.RawP99us, r.P99Ratio, verdict)
	}
	return exitOK
}

// agrees says whether a ratio ours / wrk is within wrkTolerance of 1.
func agrees(ratio float64) bool { return ratio >= 1-wrkTolerance-1e-9 && ratio <= 1+wrkTolerance+1e-9 }

// parseLevels reads --conns-list (or, if empty, the one level conns/threads).
func parseLevels(list string, conns, threads int) ([]wrkLevel, error) {
	var levels []wrkLevel
	if list == "" {
		levels = []wrkLevel{{conns, threads}}
	} else {
		for _, f := range strings.Split(list, ",") {
			c, t, hasT := strings.Cut(strings.TrimSpace(f), ":")
			lv := wrkLevel{threads: threads}
			var err error
			if lv.conns, err = strconv.Atoi(c); err != nil {
				return nil, err
			}
			if hasT {
				if lv.threads, err = strconv.Atoi(t); err != nil {
					return nil, err
				}
			}
			levels = append(levels, lv)
		}
	}
	for _, lv := range levels {
		if lv.threads < 1 || lv.threads > lv.conns {
			return nil, fmt.Errorf("level %d:%d: want conns >= threads >= 1", lv.conns, lv.threads)
		}
	}
	return levels, nil
}

// runWrk runs wrk once and parses its rate and latency distribution.
func runWrk(wrk, script, addr string, threads, conns int, dur time.Duration) (wrkSample, error) {
	out, err := exec.Command(wrk, "-t", strconv.Itoa(threads), "-c", strconv.Itoa(conns),
		"-d", strconv.Itoa(int(dur.Round(time.Second)/time.Second))+"s", "--latency", "-s", script,
		"http://"+addr+"/api/v1/order").CombinedOutput()
	if err != nil {
		return wrkSample{}, fmt.Errorf("wrk: %w: %s", err, out)
	}
	return parseWrk(out)
}

var (
	wrkRPS = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkPct = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkNon = regexp.MustCompile(`(?m)^\s+Non-2xx or 3xx responses:\s+(\d+)`)
)

// parseWrk reads wrk --latency output.
func parseWrk(out []byte) (wrkSample, error) {
	var s wrkSample
	m := wrkRPS.FindSubmatch(out)
	if m == nil {
		return s, fmt.Errorf("wrk output has no Requests/sec: %s", out)
	}
	s.RPS, _ = strconv.ParseFloat(string(m[1]), 64)
	if n := wrkNon.FindSubmatch(out); n != nil {
		return s, fmt.Errorf("wrk saw %s non-2xx responses", n[1])
	}
	for _, m := range wrkPct.FindAllSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(string(m[2]), 64)
		switch string(m[3]) {
		case "ms":
			v *= 1e3
		case "s":
			v *= 1e6
		}
		if string(m[1]) == "50" {
			s.P50us = v
		} else {
			s.P99us = v
		}
	}
	if s.P50us == 0 || s.P99us == 0 {
		return s, fmt.Errorf("wrk output has no 50%%/99%% latency lines (--latency): %s", out)
	}
	return s, nil
}

// runOurs runs our generator once, closed loop, in a child process of its
// own: with the evloop engine, threads event loops (as wrk -t runs as many
// threads) and GOMAXPROCS=threads+1; with the fasthttp engine,
// GOMAXPROCS=threads.
func runOurs(exe, addr, engine string, threads, conns int, dur time.Duration) (wrkSample, error) {
	cmd := exec.Command(exe, "http-ceiling", "--addr", addr, "--engine", engine, "--threads", strconv.Itoa(threads),
		"--conns", strconv.Itoa(conns),
		"--duration", dur.String(), "--warmup", "0s", "--fixed-body", "--json")
	procs := threads
	if engine == bench.EngineEvloop {
		// The loops are the CPU budget, as wrk's threads are; one more P
		// runs the rest (the main goroutine's timers, GC) without taking
		// a loop's, and lets the loops wait in epoll without the Go
		// scheduler's syscall hand-offs (bench/http_evloop_linux.go, rawWait).
		procs++
	}
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs), childEnv+"=1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return wrkSample{}, fmt.Errorf("our generator: %w: %s", err, errb.Bytes())
	}
	var r bench.HTTPResult
	if err := json.Unmarshal(out, &r); err != nil {
		return wrkSample{}, fmt.Errorf("our generator: %w: %s", err, out)
	}
	if r.Errors > 0 || r.Non2xx > 0 {
		return wrkSample{}, errors.New("our generator saw errors or non-2xx answers")
	}
	return wrkSample{RPS: r.RPS, P50us: r.WrkP50us, P99us: r.WrkP99us, RawP50us: r.P50us, RawP99us: r.P99us}, nil
}

// medianSample is the per-field median.
func medianSample(s []wrkSample) wrkSample {
	f := func(get func(wrkSample) float64) float64 {
		v := make([]float64, len(s))
		for i := range s {
			v[i] = get(s[i])
		}
		return median(v)
	}
	return wrkSample{RPS: f(func(x wrkSample) float64 { return x.RPS }),
		P50us:    f(func(x wrkSample) float64 { return x.P50us }),
		P99us:    f(func(x wrkSample) float64 { return x.P99us }),
		RawP50us: f(func(x wrkSample) float64 { return x.RawP50us }),
		RawP99us: f(func(x wrkSample) float64 { return x.RawP99us })}
}

// median of v (the mean of the middle two for an even count); 0 if empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func ratio3(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return float64(int64(a/b*1000+0.5)) / 1000
}
