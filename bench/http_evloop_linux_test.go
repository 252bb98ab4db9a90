//go:build linux

package bench

// These tests load local servers with EngineEvloop and check what it
// counts against what the servers saw and did: request counts, non-2xx
// answers, connections the server ends, answers in pieces, requests too
// big for one write, the open loop's rate, and that a run leaves no
// socket or goroutine behind.

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// evCfg is a short closed-loop evloop run against addr.
func evCfg(addr string, conns int) HTTPConfig {
	return HTTPConfig{Addr: addr, Method: "POST", Path: "/x", Conns: conns, Duration: 300 * time.Millisecond,
		Engine: EngineEvloop, Request: func(c, i int, req *fasthttp.Request) {
			req.SetBodyString(fmt.Sprintf(`{"c":%d,"i":%d}`, c, i))
		}}
}

// serve runs a fasthttp server with h on a free port until the test ends.
func serve(t *testing.T, s *fasthttp.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Shutdown() })
	return ln.Addr().String()
}

// rawServe runs handle on every connection accepted on a free port until
// the test ends (then the listener and every connection are closed).
func rawServe(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); handle(c) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// readRequest reads one request from br (false at EOF or on an error).
func readRequest(br *bufio.Reader) bool {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	return req.Read(br) == nil
}

func mustRun(t *testing.T, cfg HTTPConfig) HTTPResult {
	t.Helper()
	res, err := RunHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Every answer counted is one the server gave: with no warm-up the
// server's count exceeds ours only by the requests answered before the
// measured window opened or in flight when it closed (at most a few per
// connection), and each request carries the next number of its client.
func TestEvloopCountsWhatTheServerAnswered(t *testing.T) {
	var served atomic.Int64
	var bad atomic.Pointer[string]
	next := make([]atomic.Int64, 8)
	addr := serve(t, &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		var c, i int
		if _, err := fmt.Sscanf(string(ctx.PostBody()), `{"c":%d,"i":%d}`, &c, &i); err != nil || c < 0 || c >= len(next) ||
			!next[c].CompareAndSwap(int64(i), int64(i+1)) {
			s := string(ctx.PostBody())
			bad.CompareAndSwap(nil, &s)
		}
		served.Add(1)
	}})
	cfg := evCfg(addr, 8)
	cfg.Threads = 2
	res := mustRun(t, cfg)
	if p := bad.Load(); p != nil {
		t.Fatalf("request out of order or malformed: %s", *p)
	}
	n := served.Load()
	if res.Errors != 0 || res.Non2xx != 0 || res.Requests < 200 || n < res.Requests || n > res.Requests+3*8 {
		t.Fatalf("server answered %d, result %+v", n, res)
	}
}

// Non-2xx answers are counted, and the first one's body is kept.
func TestEvloopNon2xx(t *testing.T) {
	var n atomic.Int64
	addr := serve(t, &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if n.Add(1)%4 == 0 {
			ctx.SetStatusCode(418)
			ctx.SetBodyString("teapot")
		}
	}})
	cfg := evCfg(addr, 4)
	cfg.Threads = 1 // fewer loops than Ps: the loop waits in epoll without the scheduler (rawWait)
	res := mustRun(t, cfg)
	if res.Errors != 0 || res.Non2xx == 0 || res.FirstBody != "418 teapot" {
		t.Fatalf("result %+v", res)
	}
	if q := float64(res.Non2xx) / float64(res.Requests); q < 0.2 || q > 0.3 {
		t.Fatalf("%d non-2xx of %d requests, want a quarter", res.Non2xx, res.Requests)
	}
}

// A server that drops the connection instead of answering costs one
// error per drop, and the load goes on over new connections; a server that
// says Connection: close costs none.
func TestEvloopServerClosesConnections(t *testing.T) {
	var answered, dropped atomic.Int64
	addr := rawServe(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for k := 0; readRequest(br); k++ {
			if k == 4 { // the fifth request on every connection: no answer
				dropped.Add(1)
				return
			}
			answered.Add(1)
			if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")); err != nil {
				return
			}
		}
	})
	res := mustRun(t, evCfg(addr, 4))
	if res.Errors < 10 || res.Requests-res.Errors < 4*res.Errors-8 || !strings.Contains(res.FirstErr, "closed") {
		t.Fatalf("answered %d dropped %d, result %+v", answered.Load(), dropped.Load(), res)
	}

	addr = serve(t, &fasthttp.Server{Handler: func(*fasthttp.RequestCtx) {}, MaxRequestsPerConn: 3})
	if res := mustRun(t, evCfg(addr, 4)); res.Errors != 0 || res.Requests < 100 {
		t.Fatalf("Connection: close: %+v", res)
	}
}

// An answer written in pieces is read whole, and its time ends with its
// last piece; a large one grows the read buffer.
func TestEvloopAnswerInPieces(t *testing.T) {
	body := strings.Repeat("b", 100_000)
	pieces := []string{"HTT", "P/1.1 200 OK\r\nContent-Le", "ngth: 100000\r\n\r", "\n" + body[:10], body[10:50_000], body[50_000:]}
	addr := rawServe(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for readRequest(br) {
			for _, p := range pieces {
				if _, err := c.Write([]byte(p)); err != nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	})
	res := mustRun(t, evCfg(addr, 2))
	if res.Errors != 0 || res.Non2xx != 0 || res.Requests < 10 {
		t.Fatalf("result %+v", res)
	}
	if res.P50us < 5_000 {
		t.Fatalf("p50 %.0f us: the answer takes at least 6 ms to arrive", res.P50us)
	}
}

// A request bigger than the socket buffers, to a server that waits before
// it reads each one, is written over several EPOLLOUT wake-ups (EAGAIN
// first) and arrives whole.
func TestEvloopPartialWrites(t *testing.T) {
	big := strings.Repeat("x", 4<<20)
	var whole, broken atomic.Int64
	addr := rawServe(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req := fasthttp.AcquireRequest()
		defer fasthttp.ReleaseRequest(req)
		for {
			time.Sleep(20 * time.Millisecond) // the client's buffers fill meanwhile
			req.Reset()
			if req.ReadLimitBody(br, 8<<20) != nil {
				return
			}
			if string(req.Body()) == big {
				whole.Add(1)
			} else {
				broken.Add(1)
			}
			if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")); err != nil {
				return
			}
		}
	})
	cfg := evCfg(addr, 2)
	cfg.Request = func(_, _ int, req *fasthttp.Request) { req.SetBodyString(big) }
	// ~50 ms a request under -race on an idle machine, 100-250 ms on a busy
	// one: 2 s leaves room for the two whole round trips asked for.
	cfg.Duration = 2 * time.Second
	if res := mustRun(t, cfg); res.Errors != 0 || res.Non2xx != 0 || res.Requests < 2 || broken.Load() != 0 {
		t.Fatalf("server saw %d whole and %d broken requests; result %+v", whole.Load(), broken.Load(), res)
	}
}

// A chunked answer is an error (this reader frames by Content-Length
// only), not a hang.
func TestEvloopChunkedIsAnError(t *testing.T) {
	addr := rawServe(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for readRequest(br) {
			if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")); err != nil {
				return
			}
		}
	})
	res := mustRun(t, evCfg(addr, 2))
	if res.Errors == 0 || res.Errors != res.Requests || !strings.Contains(res.FirstErr, "chunked") {
		t.Fatalf("result %+v", res)
	}
}

// The open loop offers its rate: at a modest rate it achieves it.
func TestEvloopOpenLoopRate(t *testing.T) {
	addr := serve(t, &fasthttp.Server{Handler: func(*fasthttp.RequestCtx) {}})
	cfg := evCfg(addr, 8)
	cfg.Rate, cfg.Duration, cfg.Warmup = 2000, 500*time.Millisecond, 50*time.Millisecond
	// On a shared machine another process may take the CPU for part of a
	// half-second run: a rate is shown by any of 3 runs (a generator that
	// cannot keep it misses it every time).
	keepsRate := func() {
		t.Helper()
		var res HTTPResult
		for range 3 {
			res = mustRun(t, cfg)
			if res.Errors == 0 && res.RPS >= 0.93*cfg.Rate && res.RPS <= 1.07*cfg.Rate && res.OfferedRPS == cfg.Rate {
				return
			}
		}
		t.Fatalf("offered %.0f/s, result %+v", cfg.Rate, res)
	}
	keepsRate()
	cfg.Threads = 1 // rawWait: the schedule's timeouts in a raw epoll_pwait2
	keepsRate()
}

// A run closes every socket and epoll instance it opened and ends every
// goroutine it started.
func TestEvloopLeavesNothing(t *testing.T) {
	// A server of a goroutine per connection, which ends when ours closes
	// (fasthttp's keeps idle workers).
	addr := rawServe(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for readRequest(br) {
			if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")); err != nil {
				return
			}
		}
	})
	fds := func() int {
		d, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip(err)
		}
		return len(d)
	}
	fds0, g0 := fds(), runtime.NumGoroutine()
	cfg := evCfg(addr, 16)
	cfg.Duration = 100 * time.Millisecond
	mustRun(t, cfg)
	// The server's side of each connection closes when it sees ours close: poll.
	deadline := time.Now().Add(3 * time.Second)
	for fds() > fds0 || runtime.NumGoroutine() > g0 {
		if time.Now().After(deadline) {
			t.Fatalf("fds %d -> %d, goroutines %d -> %d", fds0, fds(), g0, runtime.NumGoroutine())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunHTTPUnknownEngine(t *testing.T) {
	cfg := evCfg("127.0.0.1:1", 1)
	cfg.Engine = "curl"
	if _, err := RunHTTP(cfg); err == nil {
		t.Fatal("unknown engine accepted")
	}
}
