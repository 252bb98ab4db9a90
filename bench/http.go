package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
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
type HTTPConfig struct {
	Addr     string // host:port
	Method   string
	Path     string
	Conns    int
	Duration time.Duration
	Warmup   time.Duration
	Rate     float64 // offered requests/s in total, open loop; 0 = closed loop
	// Request fills the body and headers of request i of client c (the
	// request's method and URI are already set).
	Request func(c, i int, req *fasthttp.Request)
}

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
}

// RunHTTP runs the load and returns its result.
func RunHTTP(cfg HTTPConfig) (HTTPResult, error) {
	if cfg.Conns < 1 || cfg.Duration <= 0 || cfg.Request == nil || cfg.Rate < 0 {
		return HTTPResult{}, errors.New("bench: http load needs conns >= 1, a duration, a rate >= 0 and a request func")
	}
	// interval is each client's send period in the open loop (0 = closed).
	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(cfg.Conns) / cfg.Rate * float64(time.Second))
	}
	intervalUs := max(interval.Microseconds(), 1)
	hc := &fasthttp.HostClient{Addr: cfg.Addr, MaxConns: cfg.Conns, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, MaxIdemponentCallAttempts: 1}
	var (
		counting  atomic.Bool
		stop      atomic.Bool
		requests  atomic.Int64
		non2xx    atomic.Int64
		errs      atomic.Int64
		firstErr  atomic.Pointer[string]
		firstBody atomic.Pointer[string]
		mu        sync.Mutex
		hist      = newHTTPHist()
		raw       = newHTTPHist()
		wg        sync.WaitGroup
		t0        = time.Now()
	)
	for c := 0; c < cfg.Conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local, localRaw := newHTTPHist(), newHTTPHist()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			next := t0.Add(interval * time.Duration(c) / time.Duration(cfg.Conns)) // open loop: the next send
			for i := 0; !stop.Load(); i++ {
				if interval > 0 {
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
					if next = next.Add(interval); time.Until(next) < 0 {
						next = time.Now() // late: skip the missed slots, no burst
					}
				}
				req.Reset()
				req.Header.SetMethod(cfg.Method)
				req.SetRequestURI("http://" + cfg.Addr + cfg.Path)
				cfg.Request(c, i, req)
				t0 := time.Now()
				err := hc.Do(req, resp)
				d := time.Since(t0)
				if !counting.Load() {
					continue
				}
				requests.Add(1)
				if err != nil {
					errs.Add(1)
					s := err.Error()
					firstErr.CompareAndSwap(nil, &s)
					time.Sleep(time.Millisecond)
					continue
				}
				if sc := resp.StatusCode(); sc < 200 || sc > 299 {
					non2xx.Add(1)
					s := fmt.Sprintf("%d %s", sc, resp.Body())
					firstBody.CompareAndSwap(nil, &s)
				}
				us := max(d.Microseconds(), 1)
				_ = localRaw.RecordValue(us)
				if interval > 0 {
					_ = local.RecordCorrectedValue(us, intervalUs)
				} else {
					_ = local.RecordValue(us)
				}
			}
			mu.Lock()
			hist.Merge(local)
			raw.Merge(localRaw)
			mu.Unlock()
		}()
	}
	time.Sleep(cfg.Warmup)
	counting.Store(true)
	start := time.Now()
	time.Sleep(cfg.Duration)
	counting.Store(false)
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	res := HTTPResult{Requests: requests.Load(), Non2xx: non2xx.Load(), Errors: errs.Load(),
		RPS:   float64(requests.Load()) / elapsed.Seconds(),
		P50us: float64(hist.ValueAtQuantile(50)), P99us: float64(hist.ValueAtQuantile(99)),
		P999us: float64(hist.ValueAtQuantile(99.9))}
	if interval > 0 {
		res.OfferedRPS, res.RawP99us = cfg.Rate, float64(raw.ValueAtQuantile(99))
	} else if perConn := res.Requests / int64(cfg.Conns); perConn > 0 {
		c := WrkCorrected(raw, elapsed.Microseconds()/perConn)
		res.WrkP50us, res.WrkP99us = float64(c.ValueAtQuantile(50)), float64(c.ValueAtQuantile(99))
	}
	if p := firstErr.Load(); p != nil {
		res.FirstErr = *p
	}
	if p := firstBody.Load(); p != nil {
		res.FirstBody = *p
	}
	return res, nil
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

// helloOrder mirrors the order request the exchange parses, so the
// baseline does the same JSON work.
type helloOrder struct {
	Market        string `json:"market"`
	Side          string `json:"side"`
	Type          string `json:"type"`
	TimeInForce   string `json:"time_in_force"`
	Price         string `json:"price"`
	Quantity      string `json:"quantity"`
	QuoteQuantity string `json:"quote_quantity"`
	ClientOrderID string `json:"client_order_id"`
}

// answerBufs are the hello-world target's scratch buffers for answers.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// appendHelloAnswer appends the hello-world target's answer to o: an
// order in the exchange's response shape (DESIGN §5), so the baseline
// writes, and the load generator reads, as many bytes as against the
// exchange. In the bench workload (cmd/bench's orderBody) half the
// exchange's answers are an order left resting (NEW, no fills) and half an
// order filled against one maker; the baseline answers a SELL as the
// first and a BUY as the second, with the decimals written at the default
// assets' scales (price 6, quantity 8).
func appendHelloAnswer(b []byte, o *helloOrder, id int64) []byte {
	b = append(b, `{"order_id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"client_order_id":null,"market":"`...)
	b = append(b, o.Market...)
	b = append(b, `","side":"`...)
	b = append(b, o.Side...)
	b = append(b, `","type":"`...)
	b = append(b, o.Type...)
	b = append(b, `","time_in_force":"`...)
	b = append(b, o.TimeInForce...)
	b = append(b, `","price":"`...)
	b = appendScaled(b, o.Price, 6)
	b = append(b, `","quantity":"`...)
	b = appendScaled(b, o.Quantity, 8)
	b = append(b, `","filled_quantity":"`...)
	if o.Side != "BUY" {
		b = appendScaled(b, "0", 8)
		return append(b, `","status":"NEW","fills":[]}`...)
	}
	b = appendScaled(b, o.Quantity, 8)
	b = append(b, `","status":"FILLED","fills":[{"trade_id":`...)
	b = strconv.AppendInt(b, id/2, 10)
	b = append(b, `,"price":"`...)
	b = appendScaled(b, o.Price, 6)
	b = append(b, `","quantity":"`...)
	b = appendScaled(b, o.Quantity, 8)
	b = append(b, `","fee":"0.099998","fee_asset":"USDT","maker_order_id":`...)
	b = strconv.AppendInt(b, id-1, 10)
	b = append(b, `,"taker_order_id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"time":1795575839797}]}`...)
	return b
}

// appendScaled appends the decimal string s with exactly scale decimals
// (zeros added; s is echoed, not validated: the baseline does no decimal
// arithmetic).
func appendScaled(b []byte, s string, scale int) []byte {
	b = append(b, s...)
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		b, dot = append(b, '.'), len(s)
	}
	for n := len(s) - dot - 1; n < scale; n++ {
		b = append(b, '0')
	}
	return b
}

// StartHelloServer serves the baseline of the HTTP benchmark on a free
// 127.0.0.1 port: a fasthttp POST handler that strictly decodes the order
// JSON and answers a small JSON object, with no core behind it. It returns
// the address and a stop function.
func StartHelloServer() (string, func() error, error) {
	return StartHelloServerWith(HelloOptions{})
}

// HelloOptions change the hello-world target for checks of the load
// generator itself.
type HelloOptions struct {
	// Stall, if > 0, makes the target answer nothing for Stall at the
	// start of every StallEvery period (a request arriving inside the
	// window is answered when it ends): a known, periodic server pause
	// whose latency tail a load generator must report.
	Stall, StallEvery time.Duration
}

// StartHelloServerWith is StartHelloServer with options.
func StartHelloServerWith(opts HelloOptions) (string, func() error, error) {
	if opts.Stall > 0 && opts.StallEvery <= opts.Stall {
		return "", nil, errors.New("bench: hello stall needs StallEvery > Stall")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	epoch := time.Now()
	var orderIDs atomic.Int64
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if opts.Stall > 0 {
			if phase := time.Since(epoch) % opts.StallEvery; phase < opts.Stall {
				time.Sleep(opts.Stall - phase)
			}
		}
		var o helloOrder
		if err := json.Unmarshal(ctx.PostBody(), &o); err != nil {
			ctx.SetStatusCode(400)
			ctx.SetBodyString(`{"code":"INVALID_JSON","message":"bad body"}`)
			return
		}
		ctx.SetContentType("application/json")
		bp := answerBufs.Get().(*[]byte)
		*bp = appendHelloAnswer((*bp)[:0], &o, orderIDs.Add(1))
		ctx.SetBody(*bp) // copies
		answerBufs.Put(bp)
	}, Name: "hello"}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), srv.Shutdown, nil
}
