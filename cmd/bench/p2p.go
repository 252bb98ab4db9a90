package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
)

// bench p2p: spec 003's transfer service on the real exchange, beside the
// hello-world ceiling measured right before it with the same generator and
// connections (the baseline decodes the same JSON body):
//
//   - the full pipeline (issue 23's targets): the exchange with its
//     Postgres sink (--pg-url) and event publisher (--nats-url) on, Postgres
//     and the NATS server sharing the machine's cores with it and the
//     generator. POST /transfers (durable answer, the amount held), closed
//     loop, as a ratio to the ceiling, with what the WAL did and an
//     estimate of the ratio with Postgres and NATS on cores of their own
//     (their CPU per request taken out of the machine's: an estimate, not a
//     measurement; the sink and the publisher inside the exchange stay);
//     then p99 at 50 % of the exchange's rate (open loop, corrected for
//     coordinated omission); GET /balance-service/users/{userId}/balance
//     the same way (the baseline answers a balance of the same size); the
//     publisher's rate (messages stored per second during the POST load)
//     and lag (ubs_publisher_lag_seconds, max of samples every 100 ms).
//   - the exchange alone (--alone, on by default; a diagnostic): the same
//     without the sink and the publisher, i.e. what the request path costs.
//   - the core executing due transfers, in process: transfers per second of
//     the process's CPU time.
//
// The exchange runs with --p2p-hold 0 (transfers execute at the next tick,
// so the pending set stays far below its limits under load). The default
// is 256 connections, as bench http's headline (earlier runs used 64: with
// 64 the exchange alone is bound by the group commit's fdatasync wait, idle
// CPU beside ~25 commands per commit, not by work).

type p2pReport struct {
	Full  p2pRun     `json:"full_pipeline"`            // the targets
	Alone *p2pRun    `json:"exchange_alone,omitempty"` // diagnostic: no sink, no publisher
	Exec  execResult `json:"core_execution"`
}

// p2pRun is one configuration's measurements.
type p2pRun struct {
	Post    httpPair   `json:"post_transfers"`
	PostWAL *walWindow `json:"post_transfers_wal,omitempty"` // what the WAL did in the POST window
	// PostOwnCores estimates Post.Ratio with Postgres and the NATS server
	// on cores of their own: the baseline's machine time per request over
	// the exchange's without the postgres processes' and the rest of the
	// machine's beyond the baseline's (the NATS server, mostly). Absent
	// without CPU samples.
	PostOwnCores float64          `json:"post_ratio_own_cores_estimate,omitempty"`
	PostHalfLoad bench.HTTPResult `json:"post_transfers_half_load"` // open loop at 50 % of the exchange's rate
	Get          httpPair         `json:"get_balance"`
	Publisher    *pubResult       `json:"publisher,omitempty"`
}

type httpPair struct {
	Baseline bench.HTTPResult `json:"baseline"`
	Exchange bench.HTTPResult `json:"exchange"`
	Ratio    float64          `json:"ratio"`
}

type execResult struct {
	Transfers     int     `json:"transfers"`
	CPUSeconds    float64 `json:"cpu_seconds"`
	PerCPUSecond  float64 `json:"transfers_per_cpu_second"`
	WallPerSecond float64 `json:"transfers_per_wall_second"`
}

type pubResult struct {
	Messages   float64 `json:"messages"`
	PerSecond  float64 `json:"messages_per_second"`
	LagMaxSec  float64 `json:"lag_max_seconds"`
	LagMaxCmds float64 `json:"lag_max_commands"`
	CatchUpSec float64 `json:"catch_up_seconds"` // after the load, until the lag is 0
}

func runP2P(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench p2p", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lf := httpFlags{conns: 256} // this command's default (see above)
	lf.register(fs)
	exe := fs.String("exchange", "bin/exchange", "the exchange binary")
	alone := fs.Bool("alone", true, "also measure the exchange alone (no sink, no publisher): a diagnostic")
	pgURL := fs.String("pg-url", bench.DefaultTransferPGURL, "admin Postgres URL; the exchange's sink writes a throw-away database created there (\"none\": no Postgres)")
	natsURL := fs.String("nats-url", "nats://127.0.0.1:4222", "NATS server for the event publisher (empty: publisher off)")
	users := fs.Int("users", 64, "transfer-service users (senders)")
	execN := fs.Int("exec-transfers", 1_000_000, "due transfers the in-process core executes")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	defer lf.settleProcs()()
	fail := func(err error) int { fmt.Fprintln(stderr, "bench p2p:", err); return exitFail }
	var rep p2pReport
	var err error
	if rep.Exec, err = p2pExec(*execN); err != nil {
		return fail(err)
	}
	h, err := startHelloProcess()
	if err != nil {
		return fail(err)
	}
	defer h.stop()
	if rep.Full, err = p2pMeasure(*exe, *pgURL, *natsURL, *users, lf.config(), h); err != nil {
		return fail(err)
	}
	if *alone {
		r, err := p2pMeasure(*exe, "none", "", *users, lf.config(), h)
		if err != nil {
			return fail(err)
		}
		rep.Alone = &r
	}
	if lf.asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	printP2PRun(stdout, "full pipeline (sink and publisher on; Postgres and NATS on the same cores)", &rep.Full)
	if rep.Alone != nil {
		printP2PRun(stdout, "the exchange alone (no sink, no publisher; a diagnostic)", rep.Alone)
	}
	fmt.Fprintf(stdout, "core execution: %d due transfers in %.3f s of CPU: %.0f per CPU second (%.0f per wall second)\n",
		rep.Exec.Transfers, rep.Exec.CPUSeconds, rep.Exec.PerCPUSecond, rep.Exec.WallPerSecond)
	return exitOK
}

func printP2PRun(w io.Writer, title string, r *p2pRun) {
	fmt.Fprintf(w, "# %s\n", title)
	printHTTP(w, "baseline", r.Post.Baseline)
	printHTTP(w, "POST", r.Post.Exchange)
	if r.PostWAL != nil {
		fmt.Fprintf(w, "%-9s WAL: %s\n", "", r.PostWAL)
	}
	fmt.Fprintf(w, "POST /transfers ratio %.2f; at 50%% load (%.0f req/s offered): p50 %.0f us, p99 %.0f us\n",
		r.Post.Ratio, r.PostHalfLoad.OfferedRPS, r.PostHalfLoad.P50us, r.PostHalfLoad.P99us)
	if r.PostOwnCores > 0 {
		fmt.Fprintf(w, "POST /transfers ratio with Postgres and NATS on cores of their own (estimate from the CPU split): %.2f\n", r.PostOwnCores)
	}
	printHTTP(w, "baseline", r.Get.Baseline)
	printHTTP(w, "GET", r.Get.Exchange)
	fmt.Fprintf(w, "GET balance ratio %.2f\n", r.Get.Ratio)
	if p := r.Publisher; p != nil {
		fmt.Fprintf(w, "publisher: %.0f messages, %.0f/s; lag max %.3f s (%.0f commands); caught up %.2f s after the load\n",
			p.Messages, p.PerSecond, p.LagMaxSec, p.LagMaxCmds, p.CatchUpSec)
	}
}

// p2pMeasure starts an exchange (its sink writing a throw-away database
// created at pgURL, "none": no sink; its publisher on natsURL, "": none),
// measures POST /transfers and GET balance against it and the hello-world
// target h, and stops it.
func p2pMeasure(exe, pgURL, natsURL string, users int, cfg bench.HTTPConfig, h *helloProcess) (p2pRun, error) {
	var r p2pRun
	extra := []string{"--p2p-hold", "0s"}
	stream := ""
	if natsURL != "" {
		stream = fmt.Sprintf("UBS_BENCH_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
		extra = append(extra, "--nats-url", natsURL, "--nats-stream", stream, "--nats-subject-prefix", "ubsbench."+stream+".")
		defer deleteStream(natsURL, stream)
	}
	dbURL := "none"
	if pgURL != "none" {
		u, drop, err := bench.TempDatabase(context.Background(), pgURL)
		if err != nil {
			return r, err
		}
		defer func() { _ = drop() }()
		dbURL = u
	}
	x, err := startExchange(exe, dbURL, 1, extra...)
	if err != nil {
		return r, err
	}
	defer x.stop()
	tokens, err := p2pUsers(x.addr, users)
	if err != nil {
		return r, err
	}
	postReq := func(c, i int, req *fasthttp.Request) {
		u := (c*7 + i) % len(tokens)
		req.Header.SetContentType("application/json")
		req.Header.Set("Authorization", "Bearer "+tokens[u])
		req.SetBodyString(`{"fromUserId":"user` + strconv.Itoa(u+1) + `","toUserId":"user` + strconv.Itoa((u+1)%len(tokens)+1) +
			`","amount":0.01}`)
	}
	getReq := func(c, i int, req *fasthttp.Request) {
		u := (c*7 + i) % len(tokens)
		req.URI().SetPath("/balance-service/users/user" + strconv.Itoa(u+1) + "/balance")
		req.Header.Set("Authorization", "Bearer "+tokens[u])
	}
	run := func(addr, method, path string, pid int, fill func(int, int, *fasthttp.Request), rate float64) (bench.HTTPResult, error) {
		c := cfg
		c.Addr, c.Method, c.Path, c.Request, c.ServerPID, c.Rate = addr, method, path, fill, pid, rate
		return bench.RunHTTP(c)
	}
	// POST /transfers, with the publisher's lag sampled.
	if r.Post.Baseline, err = run(h.addr, "POST", "/transfers", h.cmd.Process.Pid, postReq, 0); err != nil {
		return r, err
	}
	before := scrapeValues(x.addr, "ubs_publisher_messages_total")
	walBefore := scrapeValues(x.addr, walKeys...)
	var lagSec, lagCmds float64
	stopLag := sampleEvery(100*time.Millisecond, func() {
		v := scrapeValues(x.addr, "ubs_publisher_lag_seconds", "ubs_publisher_lag_commands")
		lagSec, lagCmds = max(lagSec, v["ubs_publisher_lag_seconds"]), max(lagCmds, v["ubs_publisher_lag_commands"])
	})
	start := time.Now()
	r.Post.Exchange, err = run(x.addr, "POST", "/transfers", x.cmd.Process.Pid, postReq, 0)
	elapsed := time.Since(start)
	stopLag()
	if err != nil {
		return r, err
	}
	r.PostWAL = newWALWindow(walBefore, scrapeValues(x.addr, walKeys...))
	r.Post.Ratio = r.Post.Exchange.RPS / max(r.Post.Baseline.RPS, 1)
	r.PostOwnCores = ownCoresRatio(r.Post)
	if stream != "" {
		catch := time.Now()
		for time.Since(catch) < 60*time.Second {
			if v, ok := scrape(x.addr, "ubs_publisher_lag_commands"); !ok || v == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		after := scrapeValues(x.addr, "ubs_publisher_messages_total")
		n := after["ubs_publisher_messages_total"] - before["ubs_publisher_messages_total"]
		r.Publisher = &pubResult{Messages: n, PerSecond: n / (elapsed + time.Since(catch)).Seconds(),
			LagMaxSec: lagSec, LagMaxCmds: lagCmds, CatchUpSec: time.Since(catch).Seconds()}
	}
	if r.PostHalfLoad, err = run(x.addr, "POST", "/transfers", x.cmd.Process.Pid, postReq, r.Post.Exchange.RPS/2); err != nil {
		return r, err
	}
	// GET balance.
	if r.Get.Baseline, err = run(h.addr, "GET", "/balance-service/users/user1/balance", h.cmd.Process.Pid, getReq, 0); err != nil {
		return r, err
	}
	if r.Get.Exchange, err = run(x.addr, "GET", "/balance-service/users/user1/balance", x.cmd.Process.Pid, getReq, 0); err != nil {
		return r, err
	}
	r.Get.Ratio = r.Get.Exchange.RPS / max(r.Get.Baseline.RPS, 1)
	return r, nil
}

// ownCoresRatio estimates p.Ratio had Postgres and the NATS server cores of
// their own (see p2pRun.PostOwnCores); 0 without CPU samples.
func ownCoresRatio(p httpPair) float64 {
	b, x := p.Baseline.CPU, p.Exchange.CPU
	if b == nil || x == nil {
		return 0
	}
	rest := x.Total() - x.Postgres - max(0, x.Other-b.Other)
	if rest <= 0 {
		return 0
	}
	return b.Total() / rest
}

// p2pUsers creates users u1..uN (ids 1..N, 10M USD each) and returns their tokens.
func p2pUsers(addr string, n int) ([]string, error) {
	auth, err := gateway.NewAuthenticator([]byte(exchangeSecret))
	if err != nil {
		return nil, err
	}
	admin, _ := auth.Mint(1_000_000, true, 24*time.Hour, time.Now())
	tokens := mintTokens(auth, n)
	for u := 1; u <= n; u++ {
		if st, b := post(addr, "/balance-service/users", admin,
			fmt.Sprintf(`{"userId":"user%d","initialBalance":10000000,"id":%d}`, u, u)); st != 200 {
			return nil, fmt.Errorf("create user user%d: %d %s", u, st, b)
		}
	}
	return tokens, nil
}

// p2pExec measures the core executing n due transfers (ticks of at most
// core.MaxP2PExecPerTick), in process, on CPU time.
func p2pExec(n int) (execResult, error) {
	p := core.New(core.Config{})
	seq := core.Seq(0)
	apply := func(c core.Command) core.Event {
		seq++
		c.Seq, c.Time = seq, 1_700_000_000_000_000_000+int64(seq)
		evs := p.Apply(&c)
		return evs[len(evs)-1]
	}
	apply(core.Command{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 2})
	senders := (n + core.MaxP2PPendingPerUser - 1) / core.MaxP2PPendingPerUser
	for u := 1; u <= senders+1; u++ {
		if r := apply(core.Command{Kind: core.KindP2PCreateUser, User: core.UserID(u), Text: "user" + strconv.Itoa(u), Asset: 1,
			Amount: 1 << 40}); r.Code != core.OK {
			return execResult{}, fmt.Errorf("create user: %v", r.Code)
		}
	}
	for i := 0; i < n; i++ {
		from := core.UserID(i/core.MaxP2PPendingPerUser + 1)
		if r := apply(core.Command{Kind: core.KindP2PTransfer, User: from, OrderID: core.OrderID(from + 1), Asset: 1,
			Amount: 1}); r.Code != core.OK {
			return execResult{}, fmt.Errorf("transfer %d: %v", i, r.Code)
		}
	}
	cpu0, wall0 := cpuTime(), time.Now()
	done := 0
	for done < n {
		r := apply(core.Command{Kind: core.KindP2PTick})
		if r.Qty == 0 {
			return execResult{}, fmt.Errorf("a tick executed nothing with %d left", n-done)
		}
		done += int(r.Qty)
	}
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	return execResult{Transfers: done, CPUSeconds: cpu.Seconds(), PerCPUSecond: float64(done) / cpu.Seconds(),
		WallPerSecond: float64(done) / wall.Seconds()}, nil
}

// cpuTime is this process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sampleEvery calls fn every d until the returned stop is called.
func sampleEvery(d time.Duration, fn func()) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return func() { close(quit); <-done }
}

func deleteStream(url, name string) {
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		return
	}
	defer nc.Close()
	if js, err := jetstream.New(nc); err == nil {
		_ = js.DeleteStream(context.Background(), name)
	}
}
