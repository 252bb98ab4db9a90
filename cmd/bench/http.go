package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/gateway"
)

// httpReport is the one-line JSON report of the http scenario.
type httpReport struct {
	Baseline   bench.HTTPResult `json:"baseline"`              // fasthttp hello-world POST with JSON parsing
	Exchange   bench.HTTPResult `json:"exchange"`              // POST /api/v1/order with durable ack
	Ratio      float64          `json:"ratio"`                 // exchange rps / baseline rps
	SinkLagMax float64          `json:"sink_lag_max_commands"` // max of ubs_sink_lag_commands sampled every 100 ms
	SinkLagSec float64          `json:"sink_lag_max_seconds"`  // the same, converted at the measured command rate
}

// runHTTP measures POST /api/v1/order on the real exchange binary against
// a fasthttp hello-world POST that parses the same JSON, in the same run,
// with the same closed-loop load generator.
func runHTTP(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench http", flag.ContinueOnError)
	fs.SetOutput(stderr)
	exe := fs.String("exchange", "bin/exchange", "the exchange binary")
	pgURL := fs.String("pg-url", "", "Postgres URL for the exchange's sink (empty: the exchange's default)")
	conns := fs.Int("conns", 64, "concurrent keep-alive connections")
	dur := fs.Duration("duration", 10*time.Second, "measured time per target")
	warm := fs.Duration("warmup", 2*time.Second, "unmeasured warm-up per target")
	users := fs.Int("users", 64, "trading users")
	asJSON := fs.Bool("json", false, "print the report as one JSON line")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "bench http:", err); return exitFail }

	body := func(c, i int, req *fasthttp.Request) {
		side, price := "BUY", 50000+(i%5)
		if (c+i)%2 == 0 {
			side, price = "SELL", 49998+(i%5)
		}
		req.Header.SetContentType("application/json")
		req.SetBodyString(`{"market":"BTC-USDT","side":"` + side + `","type":"LIMIT","time_in_force":"GTC","price":"` +
			strconv.Itoa(price) + `","quantity":"0.001"}`)
	}

	// Baseline.
	addr, stopHello, err := bench.StartHelloServer()
	if err != nil {
		return fail(err)
	}
	base, err := bench.RunHTTP(bench.HTTPConfig{Addr: addr, Method: "POST", Path: "/api/v1/order", Conns: *conns,
		Duration: *dur, Warmup: *warm, Request: body})
	_ = stopHello()
	if err != nil {
		return fail(err)
	}

	// The exchange.
	dir, err := os.MkdirTemp("", "ubs-bench-http-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	xaddr := ln.Addr().String()
	ln.Close()
	secret := "bench-http-secret-0123456789abcdef0123456789abcdef"
	xargs := []string{"--http", xaddr, "--data-dir", filepath.Join(dir, "data"), "--jwt-secret", secret}
	if *pgURL != "" {
		xargs = append(xargs, "--pg-url", *pgURL)
	}
	cmd := exec.Command(*exe, xargs...)
	cmd.Env = os.Environ() // UBS_CPUPROFILE etc. reach the exchange
	logf, err := os.Create(filepath.Join(dir, "exchange.log"))
	if err != nil {
		return fail(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	defer func() { // SIGTERM (a profile is written on the way out), then kill
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _, _ = cmd.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	if err := waitReady(xaddr, 60*time.Second); err != nil {
		return fail(fmt.Errorf("%w (log: %s)", err, tail(filepath.Join(dir, "exchange.log"))))
	}
	auth, err := gateway.NewAuthenticator([]byte(secret))
	if err != nil {
		return fail(err)
	}
	tokens := make([]string, *users)
	admin, _ := auth.Mint(1_000_000, true, 24*time.Hour, time.Now())
	for u := range tokens {
		tokens[u], _ = auth.Mint(uint64(u+1), false, 24*time.Hour, time.Now())
		for _, a := range [][2]string{{"BTC", "100000"}, {"USDT", "1000000000"}} {
			st, b := post(xaddr, "/admin/v1/adjust", admin,
				fmt.Sprintf(`{"user_id":%d,"asset":"%s","amount":"%s","ref":"bench-%d-%s"}`, u+1, a[0], a[1], u+1, a[0]))
			if st != 200 {
				return fail(fmt.Errorf("fund user %d: %d %s", u+1, st, b))
			}
		}
	}
	var lagMu sync.Mutex
	lagMax := 0.0
	stopLag := make(chan struct{})
	lagDone := make(chan struct{})
	go func() {
		defer close(lagDone)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopLag:
				return
			case <-t.C:
				if v, ok := scrape(xaddr, "ubs_sink_lag_commands"); ok {
					lagMu.Lock()
					lagMax = max(lagMax, v)
					lagMu.Unlock()
				}
			}
		}
	}()
	ex, err := bench.RunHTTP(bench.HTTPConfig{Addr: xaddr, Method: "POST", Path: "/api/v1/order", Conns: *conns,
		Duration: *dur, Warmup: *warm, Request: func(c, i int, req *fasthttp.Request) {
			body(c, i, req)
			req.Header.Set("Authorization", "Bearer "+tokens[(c*7+i)%len(tokens)])
		}})
	close(stopLag)
	<-lagDone
	if path := os.Getenv("UBS_BENCH_METRICS"); path != "" { // keep the exchange's final /metrics
		if st, b, err := fasthttp.GetTimeout(nil, "http://"+xaddr+"/metrics", 5*time.Second); err == nil && st == 200 {
			_ = os.WriteFile(path, b, 0o644)
		}
	}
	if err != nil {
		return fail(err)
	}
	rep := httpReport{Baseline: base, Exchange: ex, SinkLagMax: lagMax}
	if base.RPS > 0 {
		rep.Ratio = ex.RPS / base.RPS
	}
	if ex.RPS > 0 {
		rep.SinkLagSec = lagMax / ex.RPS
	}
	if *asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintf(stdout, "baseline  %8.0f req/s  p50 %6.0f us  p99 %6.0f us  non-2xx %d errors %d\n",
		base.RPS, base.P50us, base.P99us, base.Non2xx, base.Errors)
	fmt.Fprintf(stdout, "exchange  %8.0f req/s  p50 %6.0f us  p99 %6.0f us  non-2xx %d errors %d\n",
		ex.RPS, ex.P50us, ex.P99us, ex.Non2xx, ex.Errors)
	if ex.FirstBody != "" {
		fmt.Fprintf(stdout, "first non-2xx: %s\n", ex.FirstBody)
	}
	fmt.Fprintf(stdout, "ratio     %.2f\nsink lag  max %.0f commands (~%.3f s)\n", rep.Ratio, lagMax, rep.SinkLagSec)
	return exitOK
}

func waitReady(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		st, _, err := fasthttp.GetTimeout(nil, "http://"+addr+"/health/ready", time.Second)
		if err == nil && st == 200 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("exchange at %s not ready within %v", addr, within)
}

func post(addr, path, token, body string) (int, string) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://" + addr + path)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode(), string(resp.Body())
}

// scrape reads one unlabelled sample from /metrics.
func scrape(addr, name string) (float64, bool) {
	st, b, err := fasthttp.GetTimeout(nil, "http://"+addr+"/metrics", time.Second)
	if err != nil || st != 200 {
		return 0, false
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(l[len(name):]), 64)
			return v, err == nil
		}
	}
	return 0, false
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
