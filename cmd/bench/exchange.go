package main

import (
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/gateway"
)

// exchangeSecret signs the bench's tokens; the exchange gets it on its command line.
const exchangeSecret = "bench-http-secret-0123456789abcdef0123456789abcdef"

// orderBody fills request i of client c with a limit order near the
// 50,000 mid of BTC-USDT; the same body goes to the exchange and to the
// hello-world target.
func orderBody(c, i int, req *fasthttp.Request) {
	side, price := "BUY", 50000+(i%5)
	if (c+i)%2 == 0 {
		side, price = "SELL", 49998+(i%5)
	}
	req.Header.SetContentType("application/json")
	req.SetBodyString(`{"market":"BTC-USDT","side":"` + side + `","type":"LIMIT","time_in_force":"GTC","price":"` +
		strconv.Itoa(price) + `","quantity":"0.001"}`)
}

// exchange is a running exchange binary with funded users. Its data dir
// is removed by stop.
type exchange struct {
	addr   string
	dir    string
	tokens []string // bearer tokens of users 1..len(tokens)
	cmd    *exec.Cmd
}

// startExchange runs exe on a free port with a fresh data dir, waits until
// it is ready and funds users users.
func startExchange(exe, pgURL string, users int, extra ...string) (*exchange, error) {
	dir, err := os.MkdirTemp("", "ubs-bench-http-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	x := &exchange{addr: ln.Addr().String(), dir: dir}
	ln.Close()
	args := []string{"--http", x.addr, "--data-dir", filepath.Join(dir, "data"), "--jwt-secret", exchangeSecret}
	if pgURL != "" {
		args = append(args, "--pg-url", pgURL)
	}
	args = append(args, extra...)
	x.cmd = exec.Command(exe, args...)
	x.cmd.Env = os.Environ() // UBS_CPUPROFILE etc. reach the exchange
	logf, err := os.Create(filepath.Join(dir, "exchange.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	x.cmd.Stdout, x.cmd.Stderr = logf, logf
	if err := x.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := waitReady(x.addr, 60*time.Second); err != nil {
		err = fmt.Errorf("%w (log: %s)", err, tail(filepath.Join(dir, "exchange.log")))
		x.stop()
		return nil, err
	}
	if err := x.fund(users); err != nil {
		x.stop()
		return nil, err
	}
	return x, nil
}

func (x *exchange) fund(users int) error {
	auth, err := gateway.NewAuthenticator([]byte(exchangeSecret))
	if err != nil {
		return err
	}
	x.tokens = mintTokens(auth, users)
	admin, _ := auth.Mint(1_000_000, true, 24*time.Hour, time.Now())
	for u := range x.tokens {
		for _, a := range [][2]string{{"BTC", "100000"}, {"USDT", "1000000000"}} {
			st, b := post(x.addr, "/admin/v1/adjust", admin,
				fmt.Sprintf(`{"user_id":%d,"asset":"%s","amount":"%s","ref":"bench-%d-%s"}`, u+1, a[0], a[1], u+1, a[0]))
			if st != 200 {
				return fmt.Errorf("fund user %d: %d %s", u+1, st, b)
			}
		}
	}
	return nil
}

// mintTokens returns bearer tokens of users 1..n.
func mintTokens(auth *gateway.Authenticator, n int) []string {
	tokens := make([]string, n)
	for u := range tokens {
		tokens[u], _ = auth.Mint(uint64(u+1), false, 24*time.Hour, time.Now())
	}
	return tokens
}

// authedOrder is orderBody with the token of one of users 1..len(tokens).
func authedOrder(tokens []string) func(c, i int, req *fasthttp.Request) {
	return func(c, i int, req *fasthttp.Request) {
		orderBody(c, i, req)
		req.Header.Set("Authorization", "Bearer "+tokens[(c*7+i)%len(tokens)])
	}
}

// helloTokens are tokens of the exchange's form for the hello-world
// target, which ignores them: its requests are byte for byte the size of
// the exchange's.
var helloTokens = sync.OnceValue(func() []string {
	auth, err := gateway.NewAuthenticator([]byte(exchangeSecret))
	if err != nil {
		panic(err)
	}
	return mintTokens(auth, 64)
})

// load runs cfg against the exchange's order endpoint, sampling the sink
// lag (ubs_sink_lag_commands) every 100 ms; it returns the result, the
// largest lag seen and what the WAL did in the measured window (nil if the
// exchange's /metrics did not answer).
func (x *exchange) load(cfg bench.HTTPConfig) (bench.HTTPResult, float64, *walWindow, error) {
	cfg.Addr, cfg.Method, cfg.Path, cfg.Request = x.addr, "POST", "/api/v1/order", authedOrder(x.tokens)
	cfg.ServerPID = x.cmd.Process.Pid
	var walBefore, walAfter map[string]float64
	cfg.OnWindow = func(open bool) {
		if open {
			walBefore = scrapeValues(x.addr, walKeys...)
		} else {
			walAfter = scrapeValues(x.addr, walKeys...)
		}
	}
	var lagMu sync.Mutex
	lagMax := 0.0
	stopLag, lagDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(lagDone)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopLag:
				return
			case <-t.C:
				if v, ok := scrape(x.addr, "ubs_sink_lag_commands"); ok {
					lagMu.Lock()
					lagMax = max(lagMax, v)
					lagMu.Unlock()
				}
			}
		}
	}()
	res, err := bench.RunHTTP(cfg)
	close(stopLag)
	<-lagDone
	return res, lagMax, newWALWindow(walBefore, walAfter), err
}

// settleSink waits until the exchange's sink backlog
// (ubs_sink_lag_commands) is at most lag commands, or for at most
// within; it returns the seconds waited. Without a sink (no gauge) it
// returns at once.
func (x *exchange) settleSink(lag float64, within time.Duration) float64 {
	start := time.Now()
	for time.Since(start) < within {
		v, ok := scrape(x.addr, "ubs_sink_lag_commands")
		if !ok || v <= lag {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return math.Round(time.Since(start).Seconds()*10) / 10
}

// stop sends SIGTERM (a profile is written on the way out), kills after
// 30 s, and removes the data dir.
//
// With UBS_BENCH_EXCHANGE_LOG=FILE in the environment, the exchange's log
// (stdout and stderr: GODEBUG=gctrace=1 output too) is kept in FILE.
func (x *exchange) stop() {
	defer os.RemoveAll(x.dir)
	if keep := os.Getenv("UBS_BENCH_EXCHANGE_LOG"); keep != "" {
		defer func() {
			if b, err := os.ReadFile(filepath.Join(x.dir, "exchange.log")); err == nil {
				_ = os.WriteFile(keep, b, 0o644)
			}
		}()
	}
	_ = x.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = x.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = x.cmd.Process.Kill()
		<-done
	}
}

// helloLoad runs cfg against a fresh hello-world target in a child
// process (see helloProcess).
func helloLoad(cfg bench.HTTPConfig) (bench.HTTPResult, error) {
	h, err := startHelloProcess()
	if err != nil {
		return bench.HTTPResult{}, err
	}
	defer h.stop()
	cfg.ServerPID = h.cmd.Process.Pid
	return helloLoadAt(h.addr, cfg)
}

// helloLoadInProcess runs cfg against a fresh hello-world target served by
// this process.
func helloLoadInProcess(cfg bench.HTTPConfig) (bench.HTTPResult, error) {
	addr, stop, err := bench.StartHelloServer()
	if err != nil {
		return bench.HTTPResult{}, err
	}
	defer func() { _ = stop() }()
	return helloLoadAt(addr, cfg)
}

// helloLoadAt runs cfg against the hello-world target at addr, with the
// exchange load's requests (orderBody with a bearer token of the same
// form) unless cfg.Request is set.
func helloLoadAt(addr string, cfg bench.HTTPConfig) (bench.HTTPResult, error) {
	cfg.Addr, cfg.Method, cfg.Path = addr, "POST", "/api/v1/order"
	if cfg.Request == nil {
		cfg.Request = authedOrder(helloTokens())
	}
	return bench.RunHTTP(cfg)
}

// fixedOrderBody is the one body wrk-check's wrk sends.
func fixedOrderBody(_, _ int, req *fasthttp.Request) {
	req.Header.SetContentType("application/json")
	req.SetBodyString(wrkBody)
}
