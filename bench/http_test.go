package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// A target that answers nothing for 20 ms of every 40 ms: every client
// has one request caught in each pause, which takes about 20 ms. Closed
// loop, that is one request in a few hundred (not in the raw p99 of a
// fast generator), but wrk's correction (WrkP99us) back-fills the
// requests the stalled clients did not send, so the pause is in the
// corrected p99 and not in p50 (it would not be if the clock started after
// the request was sent, or if stalled requests were dropped). Open loop,
// the corrected p99 has it too. Both engines.
func TestRunHTTPReportsServerPause(t *testing.T) {
	addr, stop, err := StartHelloServerWith(HelloOptions{Stall: 20 * time.Millisecond, StallEvery: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// The property is statistical and the machine is shared: a run where
	// the scheduler stalls the client itself can lift p50 too. Each case
	// gets up to 3 runs; a broken correction (the pause missing from p99,
	// or smeared into p50) fails all of them.
	for _, engine := range []string{EngineEvloop, EngineFasthttp} {
		for _, rate := range []float64{0, 400} {
			var fails []string
			for attempt := 0; attempt < 3; attempt++ {
				res, err := RunHTTP(HTTPConfig{Addr: addr, Method: "POST", Path: "/api/v1/order", Conns: 4, Engine: engine, Rate: rate,
					Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond, Request: func(_, _ int, req *fasthttp.Request) {
						req.Header.SetContentType("application/json")
						req.SetBodyString(`{"market":"BTC-USDT","side":"BUY","type":"LIMIT","price":"1","quantity":"1"}`)
					}})
				if err != nil {
					t.Fatal(err)
				}
				if res.Errors != 0 || res.Non2xx != 0 || res.Requests < 100 {
					t.Fatalf("%s rate %v: result %+v", engine, rate, res)
				}
				p50, p99 := res.WrkP50us, res.WrkP99us
				if rate > 0 {
					p50, p99 = res.P50us, res.P99us
				}
				if p99 >= 15_000 && p50*2 <= p99 {
					fails = nil
					break
				}
				fails = append(fails, fmt.Sprintf("corrected p50 %.0f us, p99 %.0f us (%+v)", p50, p99, res))
			}
			if fails != nil {
				t.Errorf("%s rate %v: want the 20 ms pause in p99 and not in p50; every run: %v", engine, rate, fails)
			}
		}
	}
}

func TestHelloStallNeedsPeriod(t *testing.T) {
	if _, _, err := StartHelloServerWith(HelloOptions{Stall: time.Second, StallEvery: time.Second}); err == nil {
		t.Fatal("stall as long as its period accepted")
	}
}

// WrkCorrected adds, for each sample n >= 2*expected, samples at
// n-expected, n-2*expected, ... while they exceed expected (wrk's
// stats_correct), and nothing for faster samples.
func TestWrkCorrected(t *testing.T) {
	h := newHTTPHist()
	_ = h.RecordValues(1000, 100)
	_ = h.RecordValues(1500, 5) // < 2*expected: no synthetic samples
	_ = h.RecordValue(10_000)   // + 9000, 8000, ..., 2000: 8 samples
	c := WrkCorrected(h, 1000)
	if c.TotalCount() != 114 || c.Max() < 10_000 || c.Max() > 10_010 {
		t.Fatalf("count %d max %d, want 114 and 10000", c.TotalCount(), c.Max())
	}
	got := map[int64]int64{}
	for _, b := range c.Distribution() {
		if b.Count > 0 {
			got[b.From] = b.Count
		}
	}
	want := map[int64]int64{1000: 100, 1500: 5, 2000: 1, 3000: 1, 4000: 1, 5000: 1, 6000: 1, 7000: 1, 8000: 1, 9000: 1, 10_000: 1}
	if len(got) != len(want) {
		t.Fatalf("samples %v, want %v", got, want)
	}
	for v, n := range want {
		if got[v] != n {
			t.Errorf("%d samples at %d, want %d (all: %v)", got[v], v, n, got)
		}
	}
	if h.TotalCount() != 106 {
		t.Errorf("the input changed: %d", h.TotalCount())
	}
	if WrkCorrected(h, 0).TotalCount() != 106 {
		t.Error("expected 0 must add nothing")
	}
}
