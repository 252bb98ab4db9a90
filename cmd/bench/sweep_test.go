package main

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

const fakeMetrics = `# HELP ubs_journal_append_seconds WAL write + fsync time per group commit.
# TYPE ubs_journal_append_seconds histogram
ubs_journal_append_seconds_bucket{le="0.01"} %d
ubs_journal_append_seconds_bucket{le="0.025"} %d
ubs_journal_append_seconds_bucket{le="0.1"} %d
ubs_journal_append_seconds_bucket{le="+Inf"} %d
ubs_journal_append_seconds_sum 1.5
ubs_journal_append_seconds_count %d
ubs_sink_lag_commands %d
`

// A fake exchange /metrics: the WAL histogram and the sink lag, which
// falls by 2000 commands per scrape.
func fakeExchange(t *testing.T, buckets [4]int, lag int64) *exchange {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var left atomic.Int64
	left.Store(lag)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		l := max(left.Add(-2000), 0)
		fmt.Fprintf(ctx, fakeMetrics, buckets[0], buckets[1], buckets[2], buckets[3], buckets[3], l)
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return &exchange{addr: ln.Addr().String()}
}

func TestSlowAppendsFromBuckets(t *testing.T) {
	x := fakeExchange(t, [4]int{90, 95, 98, 100}, 0)
	after := scrapeBuckets(x.addr, "ubs_journal_append_seconds")
	if len(after) != 4 || after["+Inf"] != 100 || after["0.025"] != 95 {
		t.Fatalf("buckets %v", after)
	}
	before := map[string]float64{"0.01": 50, "0.025": 52, "0.1": 53, "+Inf": 53}
	// 47 appends in between: 43 at most 25 ms, 2 more at most 100 ms, 2 over.
	if got := slowerThan(before, after, "0.025"); got != 4 {
		t.Errorf("over 25 ms: %v, want 4", got)
	}
	if got := slowerThan(before, after, "0.1"); got != 2 {
		t.Errorf("over 100 ms: %v, want 2", got)
	}
	if got := slowerThan(before, nil, "0.1"); got != 0 {
		t.Errorf("no scrape: %v", got)
	}
}

func TestSettleSinkWaitsForBacklog(t *testing.T) {
	x := fakeExchange(t, [4]int{}, 9000) // below 1000 after 4 scrapes, 100 ms apart
	start := time.Now()
	waited := x.settleSink(1000, 10*time.Second)
	if d := time.Since(start); d < 250*time.Millisecond || waited < 0.2 {
		t.Fatalf("returned after %v (reported %.1f s), want about 0.3 s", d, waited)
	}
	x = fakeExchange(t, [4]int{}, 1e9) // never drains: bounded
	if waited := x.settleSink(1000, 300*time.Millisecond); waited < 0.3 || waited > 2 {
		t.Fatalf("waited %.1f s, want the 0.3 s bound", waited)
	}
	gone := &exchange{addr: "127.0.0.1:1"} // no metrics: no wait
	if waited := gone.settleSink(1000, 5*time.Second); waited > 2 {
		t.Fatalf("waited %.1f s without metrics", waited)
	}
}
