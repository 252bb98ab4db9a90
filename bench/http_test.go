package bench

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// A target that answers nothing for 20 ms of every 40 ms: every client
// has one request caught in each pause, so more than 1 % of the requests
// take about 20 ms and the generator must report that in p99 (it would
// not if its clock started after the request was sent, or if stalled
// requests were dropped).
func TestRunHTTPReportsServerPause(t *testing.T) {
	addr, stop, err := StartHelloServerWith(HelloOptions{Stall: 20 * time.Millisecond, StallEvery: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	res, err := RunHTTP(HTTPConfig{Addr: addr, Method: "POST", Path: "/api/v1/order", Conns: 4,
		Duration: time.Second, Warmup: 100 * time.Millisecond, Request: func(_, _ int, req *fasthttp.Request) {
			req.Header.SetContentType("application/json")
			req.SetBodyString(`{"market":"BTC-USDT","side":"BUY","type":"LIMIT","price":"1","quantity":"1"}`)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Non2xx != 0 || res.Requests < 100 {
		t.Fatalf("result %+v", res)
	}
	if res.P99us < 15_000 || res.P50us*2 > res.P99us {
		t.Fatalf("p50 %.0f us, p99 %.0f us: want the 20 ms pause in p99 and not in p50", res.P50us, res.P99us)
	}
}

func TestHelloStallNeedsPeriod(t *testing.T) {
	if _, _, err := StartHelloServerWith(HelloOptions{Stall: time.Second, StallEvery: time.Second}); err == nil {
		t.Fatal("stall as long as its period accepted")
	}
}
