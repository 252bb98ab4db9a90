package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"
)

// HTTPConfig is a closed-loop HTTP load: Conns clients, each sending one
// request at a time on its own keep-alive connection for Duration (after a
// Warmup whose requests are not counted).
type HTTPConfig struct {
	Addr     string // host:port
	Method   string
	Path     string
	Conns    int
	Duration time.Duration
	Warmup   time.Duration
	// Request fills the body and headers of request i of client c (the
	// request's method and URI are already set).
	Request func(c, i int, req *fasthttp.Request)
}

// HTTPResult is what a load run measured (warm-up excluded).
type HTTPResult struct {
	Requests  int64   `json:"requests"`
	Non2xx    int64   `json:"non_2xx"`
	Errors    int64   `json:"errors"` // transport errors
	RPS       float64 `json:"rps"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	P999us    float64 `json:"p999_us"`
	FirstErr  string  `json:"first_error,omitempty"`
	FirstBody string  `json:"first_non_2xx_body,omitempty"`
}

// RunHTTP runs the load and returns its result.
func RunHTTP(cfg HTTPConfig) (HTTPResult, error) {
	if cfg.Conns < 1 || cfg.Duration <= 0 || cfg.Request == nil {
		return HTTPResult{}, errors.New("bench: http load needs conns >= 1, a duration and a request func")
	}
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
		hist      = hdrhistogram.New(1, int64(60*time.Second/time.Microsecond), 3)
		wg        sync.WaitGroup
	)
	for c := 0; c < cfg.Conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := hdrhistogram.New(1, int64(60*time.Second/time.Microsecond), 3)
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for i := 0; !stop.Load(); i++ {
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
				_ = local.RecordValue(max(d.Microseconds(), 1))
			}
			mu.Lock()
			hist.Merge(local)
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
	if p := firstErr.Load(); p != nil {
		res.FirstErr = *p
	}
	if p := firstBody.Load(); p != nil {
		res.FirstBody = *p
	}
	return res, nil
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

// StartHelloServer serves the baseline of the HTTP benchmark on a free
// 127.0.0.1 port: a fasthttp POST handler that strictly decodes the order
// JSON and answers a small JSON object, with no core behind it. It returns
// the address and a stop function.
func StartHelloServer() (string, func() error, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		var o helloOrder
		if err := json.Unmarshal(ctx.PostBody(), &o); err != nil {
			ctx.SetStatusCode(400)
			ctx.SetBodyString(`{"code":"INVALID_JSON","message":"bad body"}`)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"order_id":1,"market":"` + o.Market + `","status":"NEW"}`)
	}, Name: "hello"}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), srv.Shutdown, nil
}
