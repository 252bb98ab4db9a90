package bench

import (
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// startFasthttp starts EngineFasthttp: one goroutine per connection, each
// sending through a shared fasthttp.HostClient. Its latencies include the
// Go scheduler's wake-up of the goroutine after the netpoller sees the
// answer, which wrk's event loops do not have.
func startFasthttp(r *httpRun) (func(), error) {
	cfg := r.cfg
	hc := &fasthttp.HostClient{Addr: cfg.Addr, MaxConns: cfg.Conns, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, MaxIdemponentCallAttempts: 1}
	var wg sync.WaitGroup
	for c := 0; c < cfg.Conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := newHTTPTally()
			defer r.merge(&t)
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			body := resp.Body
			next := r.t0 + int64(r.interval)*int64(c)/int64(cfg.Conns) // open loop: the next send (nanotime)
			for i := 0; !r.stop.Load(); i++ {
				if r.interval > 0 {
					if d := next - nanotime(); d > 0 {
						time.Sleep(time.Duration(d))
					}
					if next += int64(r.interval); next < nanotime() {
						next = nanotime() // late: skip the missed slots, no burst
					}
				}
				req.Reset()
				req.Header.SetMethod(cfg.Method)
				req.SetRequestURI(r.uri)
				cfg.Request(c, i, req)
				t0 := nanotime()
				err := hc.Do(req, resp)
				d := nanotime() - t0
				if !r.counting.Load() {
					continue
				}
				if err != nil {
					t.recordErr(r, err)
					time.Sleep(time.Millisecond)
					continue
				}
				t.record(r, resp.StatusCode(), d, body)
			}
		}()
	}
	return wg.Wait, nil
}
