package bench

// These tests run the in-process scenarios small: the processor and replay
// scenarios reach the same state for the same seed (replay through a real
// snapshot + WAL recovery), disk-ceiling measures every batch size asked,
// and the open-loop HTTP load keeps to its offered rate on the hello-world
// target.

import (
	"math"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

var smallWorkload = Options{Users: 200, SeedPerBook: 20}

func TestProcessorAndReplayAgree(t *testing.T) {
	p, err := RunProcessor(ProcessorConfig{Commands: 10_000, Seed: 3, Workload: smallWorkload})
	if err != nil {
		t.Fatal(err)
	}
	if p.CmdsPerSec <= 0 || p.Ratio <= 0 || p.Rejected > p.Commands/5 {
		t.Fatalf("processor %+v", p)
	}
	r, err := RunReplay(ReplayConfig{Dir: t.TempDir(), Commands: 10_000, Seed: 3, Workload: smallWorkload})
	if err != nil {
		t.Fatal(err)
	}
	if r.Commands != 10_000 || r.SnapshotSeq == 0 || r.CmdsPerSec <= 0 {
		t.Fatalf("replay %+v", r)
	}
	if r.StateHash != p.StateHash {
		t.Fatalf("seed 3: replay reached %s, the processor %s", r.StateHash, p.StateHash)
	}
}

func TestDiskCeiling(t *testing.T) {
	res, err := RunDisk(DiskConfig{Dir: t.TempDir(), Batches: []int{1, 64}, PerBatch: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.RecordSize < 20 || len(res.Points) != 2 || res.Points[1].Batch != 64 {
		t.Fatalf("%+v", res)
	}
	for _, p := range res.Points {
		if p.FsyncsPerS <= 0 || p.RecordsPerS < p.FsyncsPerS {
			t.Fatalf("%+v", p)
		}
	}
	if _, err := RunDisk(DiskConfig{Dir: t.TempDir(), Batches: []int{0}, PerBatch: time.Millisecond}); err == nil {
		t.Fatal("batch 0 accepted")
	}
}

func TestOpenLoopHTTPKeepsRate(t *testing.T) {
	addr, stop, err := StartHelloServer()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	const rate = 400.0
	res, err := RunHTTP(HTTPConfig{Addr: addr, Method: "POST", Path: "/", Conns: 4, Duration: time.Second,
		Warmup: 100 * time.Millisecond, Rate: rate, Request: func(c, i int, req *fasthttp.Request) {
			req.SetBodyString(`{"market":"BTC-USDT"}`)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Non2xx != 0 || res.OfferedRPS != rate {
		t.Fatalf("%+v", res)
	}
	if res.RPS < rate*0.8 || res.RPS > rate*1.1 {
		t.Fatalf("achieved %.0f req/s at an offered %.0f", res.RPS, rate)
	}
	if res.P99us < res.P50us || res.P99us < res.RawP99us {
		t.Fatalf("corrected percentiles below raw ones: %+v", res)
	}
}

func TestRoundSig3(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{
		{0, 0}, {1.0666, 1.07}, {0.0045178, 0.00452}, {2.345678, 2.35}, {1234.5, 1230}, {0.91137, 0.911},
	} {
		if got := roundSig3(c.in); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("roundSig3(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
