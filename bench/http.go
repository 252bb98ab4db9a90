package bench

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"
)

// HTTPConfig is an HTTP load: Conns clients, each sending one request at a
// time on its own keep-alive connection for Duration (after a Warmup whose
// requests are not counted).
//
// Closed loop (Rate 0): each client sends its next request as soon as the
// previous answer arrives; latency is the round trip.
//
// Open loop (Rate > 0): each client sends on a fixed schedule of one request
// every Conns/Rate seconds (clients staggered across the interval). A client
// whose answer comes late does not burst to catch up; it skips the missed
// slots and starts a new schedule. The requests it should have sent meanwhile
// are accounted for by recording each latency with
// hdrhistogram's RecordCorrectedValue(latency, interval), which back-fills
// the samples a stalled client omitted (coordinated omission), so the
// percentiles are those of a constant offered load.
//
// A request's latency is timed as wrk times it: from when the write of the
// request begins to when the last byte of its answer has been read.
type HTTPConfig struct {
	Addr     string // host:port
	Method   string
	Path     string
	Conns    int
	Duration time.Duration
	Warmup   time.Duration
	Rate     float64 // offered requests/s in total, open loop; 0 = closed loop
	// Engine is the load generator: EngineEvloop (the default, "") or
	// EngineFasthttp. EngineEvloop falls back to EngineFasthttp where
	// there is no epoll (not Linux).
	Engine string
	// Threads is how many event loops (OS threads) EngineEvloop spreads
	// the connections over, as wrk's -t; 0 = GOMAXPROCS. EngineFasthttp
	// ignores it (one goroutine per connection).
	Threads int
	// Request fills the body and headers of request i of client c (the
	// request's method and URI are already set).
	Request func(c, i int, req *fasthttp.Request)
	// ServerPID, if > 0, is the target's process on this machine: the
	// result then says where the CPU went in the measured window
	// (HTTPResult.CPU; Linux only).
	ServerPID int
	// OnWindow, if set, is called as the measured window opens (true) and
	// closes (false), between the same instants as the counting and the
	// CPU samples: a caller's own before/after readings of the target
	// (its /metrics) then cover exactly the measured requests.
	OnWindow func(open bool)
}

// The load generators of HTTPConfig.Engine.
const (
	// EngineEvloop is wrk's design: Threads event loops, each an OS thread
	// with its own epoll instance over its share of non-blocking sockets
	// (http_evloop_linux.go).
	EngineEvloop = "evloop"
	// EngineFasthttp is one goroutine per connection calling
	// fasthttp.HostClient.Do (http_fasthttp.go).
	EngineFasthttp = "fasthttp"
)

// HTTPResult is what a load run measured (warm-up excluded).
type HTTPResult struct {
	Requests int64   `json:"requests"`
	Non2xx   int64   `json:"non_2xx"`
	Errors   int64   `json:"errors"` // transport errors
	RPS      float64 `json:"rps"`
	P50us    float64 `json:"p50_us"` // open loop: corrected for coordinated omission
	P99us    float64 `json:"p99_us"`
	P999us   float64 `json:"p999_us"`
	// Open loop only: the offered rate and the uncorrected p99 (the round
	// trips actually measured, for comparison).
	OfferedRPS float64 `json:"offered_rps,omitempty"`
	RawP99us   float64 `json:"raw_p99_us,omitempty"`
	// Closed loop only: p50/p99 after wrk's own post-hoc correction
	// (WrkCorrected), for comparing with wrk, which always applies it.
	WrkP50us  float64 `json:"wrk_corrected_p50_us,omitempty"`
	WrkP99us  float64 `json:"wrk_corrected_p99_us,omitempty"`
	FirstErr  string  `json:"first_error,omitempty"`
	FirstBody string  `json:"first_non_2xx_body,omitempty"`
	// CPU: the machine's CPU time per measured request by process, when
	// HTTPConfig.ServerPID was set and /proc could be read.
	CPU *CPUShare `json:"cpu_per_request,omitempty"`
}

// RunHTTP runs the load and returns its result.
func RunHTTP(cfg HTTPConfig) (HTTPResult, error) {
	if cfg.Conns < 1 || cfg.Duration <= 0 || cfg.Request == nil || cfg.Rate < 0 || cfg.Threads < 0 {
		return HTTPResult{}, errors.New("bench: http load needs conns >= 1, a duration, a rate >= 0, threads >= 0 and a request func")
	}
	var start func(*httpRun) (wait func(), err error)
	switch cfg.Engine {
	case "", EngineEvloop:
		start = startEvloop // the fasthttp engine where there is no epoll (http_evloop_other.go)
	case EngineFasthttp:
		start = startFasthttp
	default:
		return HTTPResult{}, fmt.Errorf("bench: unknown http engine %q (%s or %s)", cfg.Engine, EngineEvloop, EngineFasthttp)
	}
	r := &httpRun{cfg: cfg, uri: "http://" + cfg.Addr + cfg.Path, hist: newHTTPHist(), raw: newHTTPHist()}
	if cfg.Rate > 0 {
		r.interval = time.Duration(float64(cfg.Conns) / cfg.Rate * float64(time.Second))
	}
	r.intervalUs = max(r.interval.Microseconds(), 1)
	r.t0 = nanotime()
	wait, err := start(r)
	if err != nil {
		return HTTPResult{}, err
	}
	time.Sleep(cfg.Warmup)
	var cpu0, cpu1 *cpuSample
	if cfg.ServerPID > 0 {
		cpu0, _ = sampleCPU(cfg.ServerPID) // nil: no shares
	}
	if cfg.OnWindow != nil {
		cfg.OnWindow(true)
	}
	r.counting.Store(true)
	begin := time.Now()
	time.Sleep(cfg.Duration)
	r.counting.Store(false)
	elapsed := time.Since(begin)
	if cfg.OnWindow != nil {
		cfg.OnWindow(false)
	}
	if cpu0 != nil {
		cpu1, _ = sampleCPU(cfg.ServerPID)
	}
	r.stop.Store(true)
	wait()
	res := r.result(elapsed)
	if cpu1 != nil {
		res.CPU = share(cpu0, cpu1, res.Requests)
	}
	return res, nil
}

// httpRun is the state one RunHTTP call shares with its engine's workers.
type httpRun struct {
	cfg        HTTPConfig
	uri        string        // the request URI, http://Addr/Path
	interval   time.Duration // each client's send period in the open loop; 0 = closed loop
	intervalUs int64         // interval in µs, >= 1
	t0         int64         // nanotime() at the start: client c's open-loop schedule starts at t0 + interval*c/Conns
	counting   atomic.Bool   // a request completing while set is counted (the measured window)
	stop       atomic.Bool   // the workers end at their next request
	firstErr   atomic.Pointer[string]
	firstBody  atomic.Pointer[string]

	mu                     sync.Mutex // guards the totals, which the workers merge their tallies into at the end
	requests, non2xx, errs int64
	hist, raw              *hdrhistogram.Histogram // µs; hist corrected in the open loop, raw as measured
}

// httpTally is one worker's counts and histograms (its own, merged at its end).
type httpTally struct {
	requests, non2xx, errs int64
	hist, raw              *hdrhistogram.Histogram
}

func newHTTPTally() httpTally { return httpTally{hist: newHTTPHist(), raw: newHTTPHist()} }

// recordErr counts a transport error of a counted request.
func (t *httpTally) recordErr(r *httpRun, err error) {
	t.requests++
	t.errs++
	if r.firstErr.Load() == nil {
		s := err.Error()
		r.firstErr.CompareAndSwap(nil, &s)
	}
}

// record counts an answered request of status sc that took d ns; body,
// called only for the first non-2xx answer, returns its body.
func (t *httpTally) record(r *httpRun, sc int, d int64, body func() []byte) {
	t.requests++
	if sc < 200 || sc > 299 {
		t.non2xx++
		if r.firstBody.Load() == nil {
			s := fmt.Sprintf("%d %s", sc, body())
			r.firstBody.CompareAndSwap(nil, &s)
		}
	}
	us := max(d/1e3, 1)
	_ = t.raw.RecordValue(us)
	if r.interval > 0 {
		_ = t.hist.RecordCorrectedValue(us, r.intervalUs)
	} else {
		_ = t.hist.RecordValue(us)
	}
}

func (r *httpRun) merge(t *httpTally) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests += t.requests
	r.non2xx += t.non2xx
	r.errs += t.errs
	r.hist.Merge(t.hist)
	r.raw.Merge(t.raw)
}

// result is the run's HTTPResult, once every worker has merged.
func (r *httpRun) result(elapsed time.Duration) HTTPResult {
	res := HTTPResult{Requests: r.requests, Non2xx: r.non2xx, Errors: r.errs,
		RPS:   float64(r.requests) / elapsed.Seconds(),
		P50us: float64(r.hist.ValueAtQuantile(50)), P99us: float64(r.hist.ValueAtQuantile(99)),
		P999us: float64(r.hist.ValueAtQuantile(99.9))}
	if r.interval > 0 {
		res.OfferedRPS, res.RawP99us = r.cfg.Rate, float64(r.raw.ValueAtQuantile(99))
	} else if perConn := res.Requests / int64(r.cfg.Conns); perConn > 0 {
		c := WrkCorrected(r.raw, elapsed.Microseconds()/perConn)
		res.WrkP50us, res.WrkP99us = float64(c.ValueAtQuantile(50)), float64(c.ValueAtQuantile(99))
	}
	if p := r.firstErr.Load(); p != nil {
		res.FirstErr = *p
	}
	if p := r.firstBody.Load(); p != nil {
		res.FirstBody = *p
	}
	return res
}

// WrkCorrected returns a copy of h (µs latencies of a closed loop) with
// the correction wrk applies to its latency statistics before it prints
// them, whatever the mode (wrk 4.x, src/wrk.c main and src/stats.c
// stats_correct): with expected = the run's time / (requests per
// connection), every sample n >= 2*expected is joined by samples at
// n-expected, n-2*expected, ... while they exceed expected, as if the
// stalled connection had kept sending on an average schedule. A stall of
// 100 ms at expected 1 ms thus adds ~100 samples per stalled request,
// which is why wrk's closed-loop p99 (and mean) are far above the round
// trips it measured.
func WrkCorrected(h *hdrhistogram.Histogram, expected int64) *hdrhistogram.Histogram {
	out := newHTTPHist()
	for _, b := range h.Distribution() {
		if b.Count == 0 {
			continue
		}
		v := b.From
		_ = out.RecordValues(v, b.Count)
		if expected <= 0 || v < 2*expected {
			continue
		}
		for m := v - expected; m > expected; m -= expected {
			_ = out.RecordValues(m, b.Count)
		}
	}
	return out
}

// newHTTPHist is a histogram of µs latencies up to 60 s.
func newHTTPHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(60*time.Second/time.Microsecond), 3)
}
