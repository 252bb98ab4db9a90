package main

// The whole-venue soak (issue 32, item 1), against the real binary with
// real Postgres, NATS JetStream and anvil. A seeded generator mixes what a
// venue does: spot orders of every type and time in force, cancels and
// modifies; internal transfers both ways, deposits, adjustments and
// withdrawals to anvil; binary markets through their life (create with a
// question, activate, YES/NO trades, suspend/resume, halt/resume,
// resolve YES/NO or void, settle in slices); spec 003 users and transfers
// with a short hold (create, cancel, history pages); operator halts and an
// injected core fault with its resolution. At random points it restarts
// the process (SIGKILL or SIGTERM, while requests are in flight), cuts
// Postgres (its sessions terminated with pg_terminate_backend, or every
// connection cut and new ones refused for a while) and NATS (a TCP proxy
// that drops its connections). Every other start runs the processor on
// a real-time thread (--realtime-processor).
//
// With NATS on the machine the venue is a replicated pair under automatic
// failover (--replication sync --failover auto, issue 38): a restart of the
// primary is a failover when the standby takes over (the clients go on
// against it meanwhile: 503 NOT_PRIMARY and REPLICATION_UNAVAILABLE are
// refusals, 503 SERVICE_UNAVAILABLE an unknown outcome), or the stopped
// node wins its lease back; the stopped node rejoins as a standby,
// discarding a SIGKILL's unreplicated tail (then its state is checked by
// convergence: the standby's state hashes compared with the primary's),
// and the soak follows whichever node is the primary.
//
// The history checker (soak_venue_check_test.go) runs after every restart
// and at the end: ready within 5 s of the process start; after a SIGTERM
// the state hash logged at the stop equals the one recovered and the one
// an offline replay computes; every operation the client was told
// succeeded is in the state and none it was told failed or "nothing
// happened" exists; money is conserved per asset; health/matching and
// ubs_markets list every market with its status; at the end the sink's
// Postgres equals the WAL (e2eConverged) and every JetStream event id is in
// the stream once, in order. A WebSocket client follows one trader's
// private streams and a depth stream through every restart, resubscribing
// with since (soak_venue_ws_test.go).
//
// UBS_SOAK_SEED reruns a seed; UBS_SOAK_DURATION sets the length (default
// 20 s with -short, 10 min without). A failing run prints its seed and
// the last 50 operations.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/publish"
	"github.com/ubscore/ubscore/replication"
)

// Users of the soak (ids apart from the other tests').
var svTraders = []uint64{301, 302, 303, 304}

const (
	svLastBinary = 90  // binary market ids 71..90, archived ones listed again
	svFaulty     = 309 // the negative balance that halts the core
	svP2PFirst   = 311 // spec 003 users sv-0.. get ids 311..
	svP2PUsers   = 3
	svAdmin      = 1000
)

// svBinary is what the client was told about a binary market.
type svBinary struct {
	id       int
	status   string // DRAFT ACTIVE SUSPENDED HALTED RESOLVED VOIDED SETTLED ...
	unknown  bool   // a lifecycle call's answer was lost: adopt what the venue says
	settling bool
	since    time.Time // when it was last seen ACTIVE (its trading time)
}

// done: a binary market whose life is over (settled, or voided and paid back).
func (m *svBinary) done() bool {
	return m.status == "SETTLED" || m.status == "ABSENT" || m.status == "ARCHIVED" || (m.status == "VOIDED" && !m.settling)
}

// svXfer is what the client was told about an internal transfer (by cid).
type svXfer struct {
	user  uint64
	told  string // COMMITTED, ACCEPTED (202 in progress), FAILED (recorded, failed), NONE (nothing happened), UNKNOWN
	reqID string
}

// svP2P is what the client was told about a spec 003 transfer.
type svP2P struct {
	told string // PENDING, CANCELLED, COMPLETED (a cancel refused: it executed)
}

type soak struct {
	t     *testing.T
	r     *rand.Rand
	seed  uint64
	dur   time.Duration
	short bool

	dir, pg string
	pgProxy *pgtest.Proxy
	nats    *svProxy // nil: no NATS on this machine
	stream  string
	js      jetstream.JetStream
	node    *anviltest.Node
	flags   []string
	// launches counts process starts (launchFlags).
	launches int
	s        *e2eServer

	n       int      // operations so far
	last    []string // the last 50 operations
	byKind  map[string]int
	events  map[string]int // restarts and outages by kind
	ready   []time.Duration
	acked   int
	lost    int
	contra  int
	pgDown  bool
	started time.Time

	spotMarkets map[string]string // symbol -> status told (ACTIVE, HALTED)
	orders      map[uint64]rmOrder
	verified    map[uint64]bool   // orders told final and found so
	spot        map[uint64]bool   // the spot orders among them
	atEnd       map[uint64][2]any // the last check's status and filled quantity of each order
	final       bool              // the last check: everything is read
	openOrders  []uint64
	refused     []rmRefused
	binaries    []*svBinary
	nextBinary  int
	xfers       map[string]*svXfer
	p2p         map[string]*svP2P
	p2pMaybe    int // spec 003 creates with no answer
	p2pHandles  []string
	wds         map[string]string // cid -> ACCEPTED, NONE, UNKNOWN
	wdUser      map[string]uint64
	coreHalted  bool
	faults      int    // core faults injected
	desync      string // the market a drifted level halts (until resolved)
	lastFault   time.Time
	deposits    []map[string]any          // the bodies of deposits answered credited
	adjusts     []map[string]any          // the bodies of adjustments answered 200
	gone        bool                      // a request met no process: the restart's stop is under way
	standby     *e2eServer                // the replicated primary's standby (nil: no NATS here)
	sbDir       string                    // the standby's data dir
	repl        func(dir string) []string // the flags of the node on dir under automatic failover (nil: no NATS here)
	takeovers   []time.Duration           // a failover: the primary's stop to the other node serving as the primary
	logProxy    map[string]*svProxy       // data dir -> the proxy its node reaches the replicated log (and the lease) through
	logFile     *os.File                  // UBS_SOAK_LOG: every operation, for a rerun's study
	ws          *svWS                     // the WebSocket streams' client (soak_venue_ws_test.go)
}

func TestVenueSoak(t *testing.T) {
	t.Parallel()
	e2eBinary(t)
	v := newSoak(t)
	v.setup()
	v.run()
	v.finish()
}

func newSoak(t *testing.T) *soak {
	dur := 10 * time.Minute
	seed := rand.Uint64() % 1_000_000
	if testing.Short() {
		dur, seed = 8*time.Second, 32
	}
	if s := os.Getenv("UBS_SOAK_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("UBS_SOAK_SEED=%q: %v", s, err)
		}
		seed = n
	}
	if s := os.Getenv("UBS_SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("UBS_SOAK_DURATION=%q: %v", s, err)
		}
		dur = d
	}
	v := &soak{t: t, seed: seed, dur: dur, short: testing.Short(), r: rand.New(rand.NewPCG(seed, 32)),
		byKind: map[string]int{}, events: map[string]int{}, spotMarkets: map[string]string{},
		orders: map[uint64]rmOrder{}, verified: map[uint64]bool{}, spot: map[uint64]bool{}, atEnd: map[uint64][2]any{}, xfers: map[string]*svXfer{}, p2p: map[string]*svP2P{},
		wds: map[string]string{}, wdUser: map[string]uint64{}, nextBinary: 71}
	if p := os.Getenv("UBS_SOAK_LOG"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		v.logFile = f
	}
	t.Logf("venue soak: seed %d, duration %v (rerun: UBS_SOAK_SEED=%d UBS_SOAK_DURATION=%v)", seed, dur, seed, dur)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("venue soak FAILED: seed %d (rerun: UBS_SOAK_SEED=%d UBS_SOAK_DURATION=%v); the last %d of %d operations:\n%s",
				seed, seed, dur, len(v.last), v.n, strings.Join(v.last, "\n"))
		}
	})
	return v
}

// log records an operation in the history kept for a failure's report.
func (v *soak) log(kind, format string, args ...any) {
	if kind != "restart" && kind != "outage" {
		v.n++
		v.byKind[kind]++
	}
	line := fmt.Sprintf("#%d %6.2fs %s: %s", v.n, time.Since(v.started).Seconds(), kind, fmt.Sprintf(format, args...))
	v.last = append(v.last, line)
	if v.logFile != nil {
		fmt.Fprintln(v.logFile, line)
	}
	if len(v.last) > 50 {
		v.last = v.last[1:]
	}
}

// call sends a request as user (svAdmin: the operator); err is a
// transport error (the process went away: the outcome is unknown).
func (v *soak) call(method, path string, user uint64, body any) (int, map[string]any, error) {
	tok := ""
	if user != 0 {
		tok = v.s.token(user, user == svAdmin)
	}
	st, b, err := v.s.tryDo(method, path, tok, body)
	if err != nil {
		v.gone = true
	}
	return st, b, err
}

// svUnknown: an answer to a write that leaves its outcome unknown, as a
// transport error does: 503 SERVICE_UNAVAILABLE ("may or may not have been
// applied": the core stopped, or the lease ended, after the command was
// sent to the log; the next primary then applies it).
func svUnknown(st int, b map[string]any) bool {
	return st == 503 && b["code"] == "SERVICE_UNAVAILABLE"
}

// svNotApplied: a replicated venue's definitive refusal of a write, before
// it was sequenced: 503 NOT_PRIMARY (a standby, or an old primary) or 503
// REPLICATION_UNAVAILABLE (the log does not confirm appends, a take-over
// under way). Nothing happened.
func svNotApplied(st int, b map[string]any) bool {
	return st == 503 && (b["code"] == "NOT_PRIMARY" || b["code"] == "REPLICATION_UNAVAILABLE")
}

// must sends an operator request that must answer 200 (setup only).
func (v *soak) must(method, path string, body any) map[string]any {
	v.t.Helper()
	st, b, err := v.call(method, path, svAdmin, body)
	if err != nil || st != 200 {
		v.t.Fatalf("%s %s %v: %d %v %v", method, path, body, st, b, err)
	}
	return b
}

func (v *soak) setup() {
	t := v.t
	v.pg = pgtest.NewDB(t)
	v.pgProxy = pgtest.NewProxy(t, v.pg)
	v.dir = t.TempDir()
	node, chain := rmAnvil(t)
	v.node = node
	if err := node.IntervalMining(1); err != nil { // withdrawals stay in flight ~1 s: restarts meet them
		t.Fatal(err)
	}
	v.flags = append([]string{"--enable-fault-injection", "--core-check-interval", "200ms", "--invariant-interval", "0",
		"--p2p-hold", "300ms", "--p2p-retention", "1s", "--transfer-stale-after", "1s", "--transfer-rate-per-second", "0", "--transfer-per-day", "0"}, chain...)
	v.flags[len(v.flags)-1] = fmt.Sprint("venue-soak-", v.seed)
	v.natsSetup()
	// Two nodes replicate the log (sync, R=1 on the machine's NATS,
	// reached directly: the NATS outages cut the publisher's proxy only)
	// under automatic failover (issue 38), started alike apart from their
	// node id, data dir and address: the holder of the lease is the
	// primary, the other node its standby, and a restart of the primary is
	// a failover when the standby takes over (restart).
	repl, replicated := systemReplication(t, "soak")
	v.started = time.Now()
	var d time.Duration
	if replicated {
		v.sbDir = t.TempDir()
		node := map[string]string{v.dir: "soak-a", v.sbDir: "soak-b"}
		url := os.Getenv("UBS_NATS_URL")
		if url == "" {
			url = "nats://127.0.0.1:4222"
		}
		v.logProxy = map[string]*svProxy{}
		for _, d := range []string{v.dir, v.sbDir} {
			v.logProxy[d] = newSVProxy(t, strings.TrimPrefix(url, "nats://"))
		}
		v.repl = func(dir string) []string {
			// A state hash every 50 commands: a restarted node's
			// convergence is checked within a moment of traffic. Each
			// node reaches the log through a proxy of its own (restart:
			// a SIGKILL with the primary's log cut).
			return append(repl(node[dir]), "--failover", "auto", "--replication-hash-every", "50",
				"--replication-url", "nats://"+v.logProxy[dir].addr())
		}
		d = v.startPair()
	} else {
		d = v.start()
	}
	defer func() { v.started = time.Now() }() // the run's clock starts once the venue is set up
	t.Logf("first start (migrations included): ready %v", d.Round(time.Millisecond))
	_, h, _ := v.call("GET", "/api/v1/health/matching", 0, nil)
	for m := range h["markets"].(map[string]any) {
		v.spotMarkets[m] = "ACTIVE"
	}
	// 1 BTC: the fault's 2 BTC take it below zero, which the core check finds.
	v.must("POST", "/admin/v1/adjust", map[string]any{"user_id": svFaulty, "asset": "BTC", "amount": "1", "ref": "sv-faulty"})
	for _, u := range svTraders {
		for _, a := range [][2]string{{"USDT", "1000000"}, {"BTC", "10"}, {"ETH", "100"}} {
			v.must("POST", "/admin/v1/adjust", map[string]any{"user_id": u, "asset": a[0], "amount": a[1], "ref": fmt.Sprintf("sv-%d-%s", u, a[0])})
			v.must("POST", "/admin/v1/deposit", map[string]any{"user_id": u, "asset": a[0], "amount": a[1], "tx_ref": fmt.Sprintf("sv-%d-%s", u, a[0])})
		}
	}
	for i := 0; i < svP2PUsers; i++ {
		h := fmt.Sprint("sv-", i)
		v.must("POST", "/balance-service/users", map[string]any{"userId": h, "initialBalance": 1000, "id": svP2PFirst + i})
		v.p2pHandles = append(v.p2pHandles, h)
	}
}

// natsSetup puts a proxy in front of the machine's NATS (UBS_NATS_URL or
// 127.0.0.1:4222) and has the binary publish to a stream of the soak's own.
func (v *soak) natsSetup() {
	url := os.Getenv("UBS_NATS_URL")
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		if os.Getenv("CI") != "" {
			v.t.Fatalf("NATS: %v", err)
		}
		v.t.Logf("NATS at %s: %v: the soak runs without the publisher", url, err)
		return
	}
	v.t.Cleanup(nc.Close)
	v.js, _ = jetstream.New(nc)
	v.stream = fmt.Sprintf("UBS_SOAK_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	v.t.Cleanup(func() { _ = v.js.DeleteStream(context.Background(), v.stream) })
	v.nats = newSVProxy(v.t, strings.TrimPrefix(url, "nats://"))
	v.flags = append(v.flags, "--nats-url", "nats://"+v.nats.addr(), "--nats-stream", v.stream,
		"--nats-subject-prefix", "ubssoak."+v.stream+".")
}

// start launches the process and returns the time to /health/ready.
func (v *soak) start() time.Duration {
	v.t.Helper()
	t0 := time.Now()
	v.s = e2eLaunch(v.t, v.dir, v.pgProxy.URL(), v.launchFlags()...)
	v.s.waitReady(60 * time.Second)
	d := time.Since(t0)
	defer v.wsConnect()
	if v.ready == nil { // the first start applies the migrations: not a restart to time
		v.ready = []time.Duration{}
		return d
	}
	v.ready = append(v.ready, d)
	if d > maxReady {
		v.t.Errorf("ready %v after the process start, want <= %v", d, maxReady)
	}
	return d
}

// launchFlags are the flags of the next process start: v.flags, extra, and
// for every other start (which ones by the seed) --realtime-processor, so
// that restarts, failovers and the checks after them meet the processor on
// a real-time thread as well as at normal priority.
func (v *soak) launchFlags(extra ...string) []string {
	flags := append(append([]string{}, v.flags...), extra...)
	v.launches++
	if (uint64(v.launches)+v.seed)%2 == 0 {
		flags = append(flags, "--realtime-processor")
		v.events["starts with --realtime-processor"]++
	}
	return flags
}

// launch starts the node on dir (one of the replicated pair) and waits
// until it answers ready: as a standby, the role every node starts in.
func (v *soak) launch(dir string) (*e2eServer, time.Duration) {
	v.t.Helper()
	t0 := time.Now()
	s := e2eLaunch(v.t, dir, v.pgProxy.URL(), v.launchFlags(v.repl(dir)...)...)
	s.waitReady(60 * time.Second)
	return s, time.Since(t0)
}

// startPair starts the replicated pair: the node on v.dir first, alone, so
// that it takes the lease and serves as the primary, then its standby.
func (v *soak) startPair() time.Duration {
	v.t.Helper()
	t0 := time.Now()
	v.s, _ = v.launch(v.dir)
	if v.waitPrimary(30*time.Second, false, v.s) == nil {
		v.t.Fatalf("the first node did not serve as the primary within 30 s: %s", v.pairStatus(v.s))
	}
	d := time.Since(t0)
	v.standby, _ = v.launch(v.sbDir)
	v.ready = []time.Duration{} // the first start applies the migrations: not a restart to time
	v.wsConnect()
	return d
}

// waitPrimary waits, up to within, until exactly one of nodes serves as the
// primary (its role primary, holding the lease, ready) while each other one
// says it is a standby, and returns it (nil: not within the time). With
// step the venue's clients go on meanwhile against v.s whenever it answers
// /health/ready, as through a load balancer routing by readiness: as a
// standby (503 NOT_PRIMARY), as the primary once it took over. (Between a
// promotion and ready some routes answer 503 SERVICE_UNAVAILABLE, which
// gateway/openapi/openapi.json does not describe for them: POST
// /admin/v1/deposit's "the transfer service is not ready".)
func (v *soak) waitPrimary(within time.Duration, step bool, nodes ...*e2eServer) *e2eServer {
	v.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var primary []*e2eServer
		standbys := 0
		for _, s := range nodes {
			st, err := replicationStatusTry(s)
			switch {
			case err != nil:
			case st.Role == "primary" && st.LeaseHeld && s.ready():
				primary = append(primary, s)
			case st.Role == "standby":
				standbys++
			}
		}
		if len(primary) == 1 && standbys == len(nodes)-1 {
			return primary[0]
		}
		if time.Now().After(deadline) {
			return nil
		}
		if step && !v.gone && v.s.ready() {
			v.step()
			time.Sleep(10 * time.Millisecond) // a client retrying, not a flood of refusals
		} else {
			v.gone = false // a request met a node between its serve loops: try again in a moment
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// pairStatus describes the replication status of nodes (a failure's report).
func (v *soak) pairStatus(nodes ...*e2eServer) string {
	var out []string
	for _, s := range nodes {
		st, err := replicationStatusTry(s)
		out = append(out, fmt.Sprintf("%s (%s): %+v %v", s.addr, s.dataDir, st, err))
	}
	return strings.Join(out, "; ")
}

// run is the generator: operations one after another, with restarts and
// outages at seeded random points, until the duration is over.
func (v *soak) run() {
	end := v.started.Add(v.dur)
	restarts, pgOut, natsOut := 3, 2, 1
	if !v.short { // 10 min: 25 restarts, 6 outages of each kind
		restarts = max(4, int(v.dur/(24*time.Second)))
		pgOut = max(4, int(v.dur/(90*time.Second)))
		natsOut = pgOut
	}
	if v.nats == nil {
		natsOut = 0
	}
	// The disruptions, at seeded points of the run (the first 5% and the
	// last 15% left calm).
	type at struct {
		f    float64
		kind string
	}
	var plan []at
	for i := 0; i < restarts; i++ {
		plan = append(plan, at{0.05 + (float64(i)+v.r.Float64()*0.8)/float64(restarts)*0.8, "restart"})
	}
	for i := 0; i < pgOut; i++ {
		plan = append(plan, at{0.05 + (float64(i)+0.3+v.r.Float64()*0.4)/float64(pgOut)*0.8, "pg"})
	}
	for i := 0; i < natsOut; i++ {
		plan = append(plan, at{0.05 + (float64(i)+0.2+v.r.Float64()*0.6)/float64(natsOut)*0.8, "nats"})
	}
	sort.Slice(plan, func(i, j int) bool { return plan[i].f < plan[j].f })
	var pgUp, natsUp time.Time
	// Under load the checks after the restarts eat into the run: it goes on
	// until every disruption happened, up to twice its duration.
	for now := time.Now(); now.Before(end) || (len(plan) > 0 && now.Before(end.Add(v.dur))); now = time.Now() {
		now := time.Now()
		if v.pgDown && now.After(pgUp) {
			v.pgProxy.Up()
			v.pgDown = false
			v.log("outage", "postgres back")
		}
		if !natsUp.IsZero() && now.After(natsUp) {
			v.nats.Up()
			natsUp = time.Time{}
			v.log("outage", "nats back")
		}
		if len(plan) > 0 && now.After(v.started.Add(time.Duration(plan[0].f*float64(v.dur)))) {
			switch plan[0].kind {
			case "restart":
				if v.pgDown { // a start waits for Postgres: not a restart to time
					break
				}
				plan = plan[1:]
				v.restart()
				continue
			case "pg":
				d := v.pgOutage()
				pgUp = time.Now().Add(d)
				plan = plan[1:]
			case "nats":
				d := time.Duration(1+v.r.IntN(3)) * time.Second
				v.nats.Down()
				v.events["outage nats"]++
				v.log("outage", "nats down for %v", d)
				natsUp = time.Now().Add(d)
				plan = plan[1:]
			}
		}
		v.step()
	}
	if v.pgDown {
		v.pgProxy.Up()
		v.pgDown = false
	}
	if !natsUp.IsZero() {
		v.nats.Up()
	}
	if len(plan) > 0 {
		v.t.Logf("%d disruptions not reached before the end", len(plan))
	}
}

// pgOutage cuts Postgres: either every session of the test database is
// terminated (pg_terminate_backend, repeated for a moment), or every
// connection through the proxy is cut and new ones refused for a while
// (it returns how long; 0: already over).
func (v *soak) pgOutage() time.Duration {
	if v.events["outage postgres (pg_terminate_backend)"] <= v.events["outage postgres (connections cut)"] {
		v.events["outage postgres (pg_terminate_backend)"]++
		v.log("outage", "postgres sessions terminated")
		conn := e2eConn(v.t, v.pg)
		for i := 0; i < 5; i++ {
			if _, err := conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
				v.t.Fatal(err)
			}
			v.step()
			time.Sleep(100 * time.Millisecond)
		}
		return 0
	}
	d := time.Duration(1000+v.r.IntN(2000)) * time.Millisecond
	v.events["outage postgres (connections cut)"]++
	v.log("outage", "postgres down for %v", d)
	v.pgProxy.Down()
	v.pgDown = true
	return d
}

// restart stops the process, SIGKILL or SIGTERM, a few ms after the next
// operation was sent, and checks the start and the history. A replicated
// venue's restart is a failover (failover).
func (v *soak) restart() {
	v.t.Helper()
	sig := syscall.SIGKILL // SIGKILL and SIGTERM in turn, the first by the seed
	if (uint64(v.events["restart SIGKILL"]+v.events["restart SIGTERM"])+v.seed)%2 == 0 {
		sig = syscall.SIGTERM
	}
	delay := time.Duration(v.r.IntN(15)) * time.Millisecond
	s := v.s
	name := map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM"}[sig]
	v.events["restart "+name]++
	// Every other SIGKILL of a replicated primary (the first included)
	// cuts its connection to the log first: the commands it journals
	// meanwhile are in its WAL, not in the log (a tail its restart
	// discards), and its writes answer 503 REPLICATION_UNAVAILABLE.
	cut := v.standby != nil && sig == syscall.SIGKILL && v.events["restart SIGKILL"]%2 == 1
	if cut {
		delay += 30 * time.Millisecond
		v.events["SIGKILL with the log cut"]++
		v.logProxy[v.dir].Down()
	}
	v.log("restart", "%v in %v (log cut: %v)", sig, delay, cut)
	time.AfterFunc(delay, func() { _ = s.cmd.Process.Signal(sig) })
	v.gone = false
	for done := false; !done; {
		select {
		case <-s.exited:
			done = true
		default:
			if v.gone {
				time.Sleep(5 * time.Millisecond)
			} else {
				v.step()
			}
		}
	}
	if sig == syscall.SIGTERM && s.cmd.ProcessState.ExitCode() != 0 {
		v.t.Fatalf("exit code %d after SIGTERM:\n%s", s.cmd.ProcessState.ExitCode(), s.Logs())
	}
	if v.standby != nil {
		v.failover(s, sig, name)
		return
	}
	stopHash := ""
	if sig == syscall.SIGTERM {
		stopHash = rmLogHash(v.t, s.Logs(), "exchange: stopped")
	}
	offline := rmOfflineHash(v.t, v.dir)
	d := v.start()
	v.gone = false
	recovered := rmLogHash(v.t, v.s.Logs(), "journal: recovered")
	if recovered != offline || (sig == syscall.SIGTERM && stopHash != recovered) {
		v.contra++
		v.t.Errorf("%v: state hash logged at the stop %q, computed offline %s, recovered at the start %s: want all equal",
			sig, stopHash, offline, recovered)
	}
	v.log("restart", "ready in %v, recovered %s", d.Round(time.Millisecond), recovered)
	v.check(fmt.Sprint("after restart ", v.events["restart SIGKILL"]+v.events["restart SIGTERM"], " (", name, ")"))
}

// failover follows the stop of the replicated primary s (already exited):
// the standby takes over (at once after a SIGTERM, which releases the
// lease; after the lease's TTL after a SIGKILL) while the clients go on
// against it, the stopped node restarts on its data dir (at once, or after
// a SIGKILL once the standby took over: restarted within the TTL under its
// node id it may win its own lease back), and v.s / v.dir point at the
// node serving as the primary, v.standby / v.sbDir at the other.
//
// The stopped node's recovery: without a discarded tail its state hash
// recovered at the start is the one computed offline from its data dir
// before the start (and, after a SIGTERM, the one it logged at its stop);
// a SIGKILL may leave a tail of commands the log never stored, which the
// restart discards ("replication: rejoining as a standby" with
// "discarded_tail": true; never after a SIGTERM, whose stop drains into
// the log), and the state it recovered is then checked by convergence:
// whichever node is the standby compares a state hash with the primary's
// after the restart, and never diverged.
func (v *soak) failover(s *e2eServer, sig syscall.Signal, name string) {
	t := v.t
	t.Helper()
	stopped := time.Now()
	dir, other, otherDir := v.dir, v.standby, v.sbDir
	stopHash := ""
	if sig == syscall.SIGTERM {
		stopHash = svLastRecord(t, s.Logs(), "exchange: stopped")["state_hash"].(string)
	}
	offline := rmOfflineHash(t, dir)
	v.logProxy[dir].Up()
	v.s = other // the clients' requests during the take-over go to the standby
	v.gone = false
	if v.r.IntN(2) == 0 { // else the stopped node races the standby for the lease
		if v.waitPrimary(20*time.Second, true, other) == nil {
			t.Fatalf("%s of the primary: the standby did not take over within 20 s: %s", name, v.pairStatus(other))
		}
		v.log("restart", "the standby took over in %v", time.Since(stopped).Round(time.Millisecond))
	}
	restarted, d := v.launch(dir)
	v.ready = append(v.ready, d)
	if d > maxReady {
		t.Errorf("ready %v after the process start, want <= %v", d, maxReady)
	}
	p := v.waitPrimary(20*time.Second, true, restarted, other)
	if p == nil {
		t.Fatalf("%s of the primary: no node serves as the primary 20 s after the restart: %s", name, v.pairStatus(restarted, other))
	}
	took := time.Since(stopped)
	what := "the restarted node won its lease back"
	if p == other {
		v.s, v.dir, v.standby, v.sbDir = other, otherDir, restarted, dir
		v.events["failover "+name]++
		v.takeovers = append(v.takeovers, took)
		what = "failover: the standby took over"
		if sig == syscall.SIGTERM {
			v.leaseReleased(other, stopped, "after a SIGTERM of the primary")
		}
	} else {
		v.s, v.standby = restarted, other
		v.events["lease won back after "+name]++
	}
	v.gone = false

	logs := restarted.Logs()
	rejoin := svRecords(logs, "replication: rejoining as a standby")
	discarded := len(rejoin) > 0 && rejoin[0]["discarded_tail"] == true
	recovered, _ := svFirstRecord(t, logs, "journal: recovered")["state_hash"].(string)
	switch {
	case discarded && sig == syscall.SIGTERM:
		v.contra++
		t.Errorf("SIGTERM: the restart discarded a tail of the stopped primary's WAL (%v): a graceful stop must leave none", rejoin[0])
	case discarded:
		v.events["rejoin with a discarded tail"]++
	case recovered != offline || (sig == syscall.SIGTERM && stopHash != recovered):
		v.contra++
		t.Errorf("%v: state hash logged at the stop %q, computed offline %s, recovered at the start %s: want all equal",
			sig, stopHash, offline, recovered)
	}
	v.log("restart", "ready in %v, %s %v after the stop; rejoin %v, offline %s, recovered %s",
		d.Round(time.Millisecond), what, took.Round(time.Millisecond), rejoin, offline, recovered)
	v.wsConnect()
	// The history check first: it also ends a fault's halt the stop cut
	// short (a halted core sequences nothing, no state hash to compare).
	v.check(fmt.Sprint("after restart ", v.events["restart SIGKILL"]+v.events["restart SIGTERM"], " (", name, ")"))
	v.converged(fmt.Sprint("after ", name, " of the primary"))
}

// leaseReleased: s, the standby that took over from a primary stopped by
// a SIGTERM (its exit seen at stopped), acquired the lease well within its
// TTL (--lease-ttl's default, 1.5 s): the stopped primary released it (a
// lease it left to expire is taken a TTL after its last renewal at the
// soonest; a released one at the standby's next look, 100 ms).
func (v *soak) leaseReleased(s *e2eServer, stopped time.Time, when string) {
	t := v.t
	t.Helper()
	acq := svRecords(s.Logs(), "replication: lease acquired")
	if len(acq) == 0 {
		t.Fatalf("%s: the standby took over without a log record \"replication: lease acquired\"", when)
	}
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(acq[len(acq)-1]["time"]))
	if err != nil {
		t.Fatalf("%s: lease acquired at %v: %v", when, acq[len(acq)-1]["time"], err)
	}
	if d := at.Sub(stopped); d > replication.DefaultFailoverLeaseTTL/2 {
		v.contra++
		t.Errorf("%s: the standby acquired the lease %v after the primary's exit, want < %v: was the lease released?",
			when, d, replication.DefaultFailoverLeaseTTL/2)
	}
}

// converged waits, up to 20 s while the clients go on, until the standby
// compared one more of the primary's state hashes with its own (it follows
// the log to the primary's state), never having diverged.
func (v *soak) converged(when string) {
	t := v.t
	t.Helper()
	base, err := replicationStatusTry(v.standby)
	if err != nil {
		t.Fatalf("%s: the standby's replication status: %v", when, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		st, err := replicationStatusTry(v.standby)
		switch {
		case err != nil:
			t.Fatalf("%s: the standby's replication status: %v", when, err)
		case st.Diverged || st.Role != "standby":
			v.contra++
			t.Fatalf("%s: the standby %+v, want a standby following the primary", when, st)
		case st.HashChecks > base.HashChecks:
			return
		case time.Now().After(deadline):
			t.Fatalf("%s: the standby compared no state hash with the primary's within 20 s: %s", when, v.pairStatus(v.s, v.standby))
		}
		if v.gone {
			v.gone = false
			time.Sleep(20 * time.Millisecond)
		} else {
			v.step()
		}
	}
}

// svRecords are the log records of logs whose message is msg, in order (a
// process under automatic failover serves in turn as a standby and as the
// primary, each time recovering and stopping its journal).
func svRecords(logs, msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(logs, "\n") {
		var rec map[string]any
		if strings.Contains(line, msg) && json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// svFirstRecord and svLastRecord are the first and the last log record
// with message msg, which must carry a state hash.
func svFirstRecord(t *testing.T, logs, msg string) map[string]any {
	t.Helper()
	recs := svRecords(logs, msg)
	if len(recs) == 0 || recs[0]["state_hash"] == nil {
		t.Fatalf("no log record %q with a state hash:\n%s", msg, logs)
	}
	return recs[0]
}

func svLastRecord(t *testing.T, logs, msg string) map[string]any {
	t.Helper()
	recs := svRecords(logs, msg)
	if len(recs) == 0 || recs[len(recs)-1]["state_hash"] == nil {
		t.Fatalf("no log record %q with a state hash:\n%s", msg, logs)
	}
	return recs[len(recs)-1]
}

// finish: the last check, the sink and the stream caught up, and the
// report line.
func (v *soak) finish() {
	t := v.t
	v.quiesce()
	v.checkWithdrawn()
	v.final = true
	v.check("at the end")
	v.checkRepeats()
	v.wsFinish()
	e2eWaitSink(t, v.s, v.pg)
	v.checkPostgresOrders()
	v.checkPostgresP2P()
	v.checkP2PRetention()
	v.checkStream()
	if v.standby != nil {
		v.finishPair()
	} else {
		v.s.stopWith(syscall.SIGTERM)
		stopHash := rmLogHash(t, v.s.Logs(), "exchange: stopped")
		if off := rmOfflineHash(t, v.dir); off != stopHash {
			v.contra++
			t.Errorf("at the end: state hash logged at the stop %s, offline %s", stopHash, off)
		}
	}
	e2eConverged(t, v.dir, v.pg)
	v.checkPostgresPositions()
	r := append([]time.Duration{0}, v.ready...) // [0]: none at all
	if len(r) > 1 {
		r = r[1:]
	}
	sort.Slice(r, func(i, j int) bool { return r[i] < r[j] })
	kinds := make([]string, 0, len(v.byKind))
	for k, n := range v.byKind {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	evs := make([]string, 0, len(v.events))
	for k, n := range v.events {
		evs = append(evs, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(evs)
	failovers := ""
	if len(v.takeovers) > 0 {
		tk := append([]time.Duration{}, v.takeovers...)
		sort.Slice(tk, func(i, j int) bool { return tk[i] < tk[j] })
		failovers = fmt.Sprintf("; take-over (the primary's stop to the new primary serving) min/median/max %v/%v/%v over %d failovers",
			tk[0].Round(time.Millisecond), tk[len(tk)/2].Round(time.Millisecond), tk[len(tk)-1].Round(time.Millisecond), len(tk))
	}
	t.Logf("venue soak report: seed %d, %v; operations %d (%s); restarts and outages: %s; acknowledged %d, lost %d, contradicted %d; ready min/median/max %v/%v/%v over %d restarts%s",
		v.seed, time.Since(v.started).Round(time.Second), v.n, strings.Join(kinds, " "), strings.Join(evs, " "),
		v.acked, v.lost, v.contra, r[0].Round(time.Millisecond), r[len(r)/2].Round(time.Millisecond),
		r[len(r)-1].Round(time.Millisecond), len(v.ready), failovers)
}

// finishPair ends the replicated pair: the standby reached the primary's
// last command and every state hash it compared with the primary's was
// equal; a SIGTERM of the primary hands the venue over to it at once (the
// lease released) and it recovers, as the primary, at the stopped
// primary's last seq with its state hash (also the one computed offline
// from the stopped primary's data dir); its own sink catches up and it
// stops with the state computed offline from its data dir, which v.dir
// then names (the end's checks against Postgres).
func (v *soak) finishPair() {
	t := v.t
	t.Helper()
	p, sb := v.s, v.standby
	deadline := time.Now().Add(30 * time.Second)
	for {
		pst, err := replicationStatusTry(p)
		if err != nil {
			t.Fatal(err)
		}
		a, err := sb.replTry("GET", "/api/v1/depth/BTC-USDT", sb.token(9, false), nil)
		if err == nil && a.status == 200 && a.seq >= pst.Seq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not reach the primary's seq %d within 30 s: %+v %v", pst.Seq, a, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := replicationStatus(t, sb)
	if st.Role != "standby" || st.Diverged || st.HashChecks == 0 {
		v.contra++
		t.Errorf("standby at the end: %+v, want a standby that compared state hashes and never diverged", st)
	}
	p.stopWith(syscall.SIGTERM)
	stopped := time.Now()
	last := svLastRecord(t, p.Logs(), "exchange: stopped")
	if off := rmOfflineHash(t, v.dir); off != last["state_hash"] {
		v.contra++
		t.Errorf("at the end: state hash logged at the primary's stop %v, offline %s", last["state_hash"], off)
	}
	if v.waitPrimary(20*time.Second, false, sb) == nil {
		t.Fatalf("at the end: the standby did not take over within 20 s of the primary's SIGTERM: %s", v.pairStatus(sb))
	}
	v.takeovers = append(v.takeovers, time.Since(stopped))
	v.events["failover SIGTERM at the end"]++
	v.leaseReleased(sb, stopped, "at the end")
	if rec := svLastRecord(t, sb.Logs(), "journal: recovered"); rec["seq"] != last["seq"] || rec["state_hash"] != last["state_hash"] {
		v.contra++
		t.Errorf("at the end: the standby took over with seq %v state hash %v; the primary stopped at %v with %v",
			rec["seq"], rec["state_hash"], last["seq"], last["state_hash"])
	}
	v.s, v.dir, v.standby = sb, v.sbDir, nil
	e2eWaitSink(t, v.s, v.pg)
	v.checkStream() // the new primary's publisher continued the stream: still once, in order
	v.s.stopWith(syscall.SIGTERM)
	end := svLastRecord(t, v.s.Logs(), "exchange: stopped")
	if off := rmOfflineHash(t, v.dir); off != end["state_hash"] {
		v.contra++
		t.Errorf("at the end: state hash logged at the new primary's stop %v, offline %s", end["state_hash"], off)
	}
	t.Logf("standby: %d state hash checks, took over at seq %v with the stopped primary's state hash; stopped at seq %v",
		st.HashChecks, last["seq"], end["seq"])
}

// quiesce ends what the run left open before the end's checks: a fault's
// halt is resolved, the spec 003 transfers on hold execute.
func (v *soak) quiesce() {
	v.repair()
	time.Sleep(time.Second) // the spec 003 holds (300 ms) end: nothing moves while the end is checked
}

// step is one seeded operation.
func (v *soak) step() {
	w := v.r.IntN(100)
	switch {
	case w < 28:
		v.spotOrder()
	case w < 34:
		v.cancel()
	case w < 38:
		v.modify()
	case w < 50:
		v.binaryOrder()
	case w < 57:
		v.binaryLife()
	case w < 67:
		v.internalTransfer()
	case w < 70:
		v.deposit()
	case w < 72:
		v.adjust()
	case w < 75:
		v.withdraw()
	case w < 87:
		v.p2pCreate()
	case w < 91:
		v.p2pCancel()
	case w < 93:
		v.p2pHistory()
	case w < 96:
		v.haltResume()
	case w < 97:
		v.fault()
	default:
		v.read()
	}
}

var svTIFs = []string{"GTC", "GTC", "IOC", "FOK", "POST_ONLY"}

// spotOrder places a spot order of a random type and time in force.
func (v *soak) spotOrder() {
	u := svTraders[v.r.IntN(len(svTraders))]
	market, base := "BTC-USDT", 50000
	if v.r.IntN(3) == 0 {
		market, base = "ETH-USDT", 3000
	}
	side := []string{"BUY", "SELL"}[v.r.IntN(2)]
	cid := fmt.Sprintf("sv%d-o%d", v.seed, v.n)
	body := map[string]any{"market": market, "side": side, "client_order_id": cid,
		"quantity": fmt.Sprintf("0.%03d", 1+v.r.IntN(20))}
	if v.r.IntN(8) == 0 {
		body["type"] = "MARKET"
	} else {
		body["type"] = "LIMIT"
		body["time_in_force"] = svTIFs[v.r.IntN(len(svTIFs))]
		body["price"] = strconv.Itoa(base - base/100 + v.r.IntN(base/50+1))
	}
	v.placed("spot order", u, cid, body)
}

// placed sends an order and records what the client was told.
func (v *soak) placed(kind string, u uint64, cid string, body map[string]any) {
	st, b, err := v.call("POST", "/api/v1/order", u, body)
	switch {
	case err != nil:
		v.log(kind, "user %d %v: no answer (%v)", u, body, err)
	case svUnknown(st, b): // may or may not exist: neither acknowledged nor refused
		v.log(kind, "user %d %v: unknown outcome %d %v", u, body, st, b["code"])
	case st == 200:
		oid := id(v.t, b["order_id"])
		o := rmOrder{user: u, status: b["status"].(string), filled: rmFilled(v.t, b)}
		v.orders[oid] = o
		if kind == "spot order" {
			v.spot[oid] = true
		}
		v.acked++
		if o.status == "NEW" || o.status == "PARTIALLY_FILLED" {
			v.openOrders = append(v.openOrders, oid)
		}
		v.log(kind, "user %d %v: %d %s filled %d", u, body, oid, o.status, o.filled)
	default:
		v.refused = append(v.refused, rmRefused{user: u, cid: cid, status: st, code: fmt.Sprint(b["code"])})
		v.log(kind, "user %d %v: refused %d %v", u, body, st, b["code"])
	}
}

// cancel cancels an order the client was told is open.
func (v *soak) cancel() {
	if len(v.openOrders) == 0 {
		v.read()
		return
	}
	i := v.r.IntN(len(v.openOrders))
	oid := v.openOrders[i]
	v.openOrders = append(v.openOrders[:i], v.openOrders[i+1:]...)
	o := v.orders[oid]
	st, b, err := v.call("DELETE", fmt.Sprint("/api/v1/order/", oid), o.user, nil)
	switch {
	case err != nil:
		v.log("cancel", "order %d: no answer", oid)
	case st == 200:
		v.orders[oid] = rmOrder{user: o.user, status: b["status"].(string), filled: rmFilled(v.t, b)}
		v.acked++
		v.log("cancel", "order %d: %v filled %d", oid, b["status"], rmFilled(v.t, b))
	default:
		v.log("cancel", "order %d: %d %v", oid, st, b["code"])
	}
}

// modify moves the price (and quantity) of an order told open.
func (v *soak) modify() {
	if len(v.openOrders) == 0 {
		v.read()
		return
	}
	oid := v.openOrders[v.r.IntN(len(v.openOrders))]
	o := v.orders[oid]
	_, cur, err := v.call("GET", fmt.Sprint("/api/v1/order/", oid), o.user, nil)
	if err != nil || cur["price"] == nil || cur["market"] == nil || !strings.Contains(fmt.Sprint(cur["market"]), "-") {
		v.log("modify", "order %d: not a spot order read (%v)", oid, err)
		return
	}
	base := 50000
	if cur["market"] == "ETH-USDT" {
		base = 3000
	}
	body := map[string]any{"price": strconv.Itoa(base - base/100 + v.r.IntN(base/50+1))}
	if v.r.IntN(2) == 0 {
		body["quantity"] = fmt.Sprintf("0.%03d", 1+v.r.IntN(20))
	}
	st, b, err := v.call("PATCH", fmt.Sprint("/api/v1/order/", oid), o.user, body)
	switch {
	case err != nil:
		v.log("modify", "order %d %v: no answer", oid, body)
	case st == 200:
		v.orders[oid] = rmOrder{user: o.user, status: b["status"].(string), filled: rmFilled(v.t, b)}
		v.acked++
		v.log("modify", "order %d %v: %v", oid, body, b["status"])
	default:
		v.log("modify", "order %d %v: %d %v", oid, body, st, b["code"])
	}
}

// binaryOrder trades a binary market: BUY or SELL of YES or NO.
func (v *soak) binaryOrder() {
	var live []*svBinary
	for _, m := range v.binaries {
		if m.status == "ACTIVE" {
			live = append(live, m)
		}
	}
	if len(live) == 0 {
		v.binaryLife()
		return
	}
	m := live[v.r.IntN(len(live))]
	u := svTraders[v.r.IntN(len(svTraders))]
	side := "BUY"
	if v.r.IntN(4) == 0 {
		side = "SELL"
	}
	cid := fmt.Sprintf("sv%d-b%d", v.seed, v.n)
	body := map[string]any{"market": strconv.Itoa(m.id), "outcome": []string{"YES", "NO"}[v.r.IntN(2)], "side": side,
		"type": "LIMIT", "price": fmt.Sprintf("0.%02d", 30+v.r.IntN(41)), "quantity": strconv.Itoa(1 + v.r.IntN(10)),
		"client_order_id": cid}
	v.placed("binary order", u, cid, body)
}

// binaryLife moves a binary market one step through its life, or creates one.
func (v *soak) binaryLife() {
	var open []*svBinary
	for _, m := range v.binaries {
		if !m.done() {
			open = append(open, m)
		}
	}
	var finished []*svBinary // to archive
	free := -1               // an id to list again
	for i, m := range v.binaries {
		switch {
		case m.status == "ARCHIVED" || m.status == "ABSENT":
			if free < 0 {
				free = i
			}
		case m.done() && !m.unknown:
			finished = append(finished, m)
		}
	}
	if len(finished) > 0 && v.r.IntN(2) == 0 {
		m := finished[v.r.IntN(len(finished))]
		st, b, err := v.call("POST", fmt.Sprintf("/admin/v1/binary-markets/%d/archive", m.id), svAdmin, nil)
		switch {
		case err != nil, svUnknown(st, b):
			m.unknown = true
		case st == 200:
			m.status = "ARCHIVED"
			v.acked++
		case svNotApplied(st, b): // during a failover: nothing happened
		default:
			v.t.Errorf("archive binary market %d (%s): %d %v", m.id, m.status, st, b)
		}
		v.log("binary life", "market %d archive: %d %v %v", m.id, st, b["code"], err)
		return
	}
	id := v.nextBinary
	if id > svLastBinary && free >= 0 {
		id = v.binaries[free].id
	}
	if len(open) < 2 && id <= svLastBinary {
		if id == v.nextBinary {
			v.nextBinary++
		} else {
			v.binaries = append(v.binaries[:free], v.binaries[free+1:]...)
		}
		m := &svBinary{id: id, status: "DRAFT"}
		st, b, err := v.call("POST", "/admin/v1/binary-markets", svAdmin, map[string]any{"market_id": m.id, "quote": "USDT",
			"taker_fee_ppm": 2000, "question": fmt.Sprintf("Will soak %d pass step %d?", v.seed, v.n)})
		switch {
		case err != nil, svUnknown(st, b):
			m.unknown = true
			v.binaries = append(v.binaries, m)
		case st == 200:
			v.acked++
			v.binaries = append(v.binaries, m)
		case svNotApplied(st, b): // during a failover: not created, its id free again
			m.status = "ABSENT"
			v.binaries = append(v.binaries, m)
		default:
			v.t.Errorf("create binary market %d: %d %v", m.id, st, b)
		}
		v.log("binary life", "create %d: %d %v", m.id, st, err)
		return
	}
	if len(open) == 0 {
		v.read()
		return
	}
	m := open[v.r.IntN(len(open))]
	if m.unknown {
		v.log("binary life", "market %d: answer lost before, adopting at the next check", m.id)
		return
	}
	var path string
	var body any
	switch m.status {
	case "DRAFT":
		path = "activate"
	case "ACTIVE":
		trading := 2 * time.Second // a market trades a while before its life moves on
		if !v.short {
			trading = 8 * time.Second
		}
		if m.since.IsZero() {
			m.since = time.Now()
		}
		if time.Since(m.since) < trading {
			v.binaryOrder()
			return
		}
		switch w := v.r.IntN(10); {
		case w < 2:
			path = "suspend"
		case w < 4:
			path = "halt"
		case w < 5:
			path = "void"
		case w < 8:
			return // trade on
		default:
			path, body = "resolve", map[string]any{"outcome": []string{"YES", "NO"}[v.r.IntN(2)]}
		}
	case "SUSPENDED", "HALTED":
		path = "resume"
		if v.r.IntN(3) == 0 {
			path, body = "resolve", map[string]any{"outcome": []string{"YES", "NO"}[v.r.IntN(2)]}
		}
	default: // RESOLVED, VOIDED: settle in slices
		path, body = "settle", map[string]any{"limit": 1 + v.r.IntN(3)}
	}
	url := fmt.Sprintf("/admin/v1/binary-markets/%d/%s", m.id, path)
	if path == "halt" {
		url = fmt.Sprintf("/admin/v1/markets/%d/halt", m.id)
	}
	st, b, err := v.call("POST", url, svAdmin, body)
	switch {
	case err != nil, svUnknown(st, b):
		m.unknown = true
	case st == 200:
		v.acked++
		_, g, err := v.call("GET", fmt.Sprint("/api/v1/binary-markets/", m.id), svAdmin, nil)
		if err != nil {
			m.unknown = true
		} else {
			m.status, m.settling = fmt.Sprint(g["status"]), g["settling"] == true
			if m.status == "ACTIVE" {
				m.since = time.Now()
			}
		}
	}
	v.log("binary life", "market %d %s %v: %d %v %v -> %s", m.id, path, body, st, b["code"], err, m.status)
}

// internalTransfer moves USDT FUNDING->SPOT or back, with a cid.
func (v *soak) internalTransfer() {
	u := svTraders[v.r.IntN(len(svTraders))]
	from, to := F, S
	if v.r.IntN(2) == 0 {
		from, to = S, F
	}
	cid := fmt.Sprintf("sv%d-x%d", v.seed, v.n)
	amount := fmt.Sprintf("%d.%02d", v.r.IntN(50), v.r.IntN(100))
	if v.r.IntN(20) == 0 {
		amount = "100000000" // beyond the balance: refused
	}
	st, b, err := v.call("POST", "/api/v1/internal_transfer", u, xferBody(from, to, "USDT", amount, "cid", cid))
	x := &svXfer{user: u}
	switch {
	case err != nil, svUnknown(st, b):
		x.told = "UNKNOWN"
	case st == 200 && b["state"] == "COMMITTED":
		x.told, x.reqID = "COMMITTED", fmt.Sprint(b["req_id"])
		v.acked++
	case st == 202 && b["state"] == "UNKNOWN":
		x.told, x.reqID = "UNKNOWN", fmt.Sprint(b["req_id"])
	case st == 202:
		x.told, x.reqID = "ACCEPTED", fmt.Sprint(b["req_id"])
		v.acked++
	case b["req_id"] != nil:
		x.told, x.reqID = "FAILED", fmt.Sprint(b["req_id"])
	default:
		x.told = "NONE"
	}
	v.xfers[cid] = x
	v.log("internal transfer", "user %d %s->%s %s USDT cid %s: %d %v %v -> %s", u, from, to, amount, cid, st, b["state"], b["code"], x.told)
}

// deposit credits an external deposit to a trader's FUNDING account.
func (v *soak) deposit() {
	u := svTraders[v.r.IntN(len(svTraders))]
	ref := fmt.Sprintf("sv%d-d%d", v.seed, v.n)
	body := map[string]any{"user_id": u, "asset": "USDT", "amount": "10", "tx_ref": ref}
	st, b, err := v.call("POST", "/admin/v1/deposit", svAdmin, body)
	if err == nil && st == 200 && b["credited"] == true {
		v.acked++
		v.deposits = append(v.deposits, body)
	}
	v.log("deposit", "user %d 10 USDT %s: %d %v %v", u, ref, st, b, err)
}

// adjust is an operator adjustment of a trader's SPOT account.
func (v *soak) adjust() {
	u := svTraders[v.r.IntN(len(svTraders))]
	ref := fmt.Sprintf("sv%d-a%d", v.seed, v.n)
	body := map[string]any{"user_id": u, "asset": "USDT", "amount": "5", "ref": ref}
	st, b, err := v.call("POST", "/admin/v1/adjust", svAdmin, body)
	if err == nil && st == 200 {
		v.acked++
		v.adjusts = append(v.adjusts, body)
	}
	v.log("adjust", "user %d 5 USDT %s: %d %v %v", u, ref, st, b["code"], err)
}

// withdraw sends ETH from a trader's FUNDING account to an anvil address.
func (v *soak) withdraw() {
	u := svTraders[v.r.IntN(len(svTraders))]
	cid := fmt.Sprintf("sv%d-w%d", v.seed, v.n)
	st, b, err := v.call("POST", "/api/v1/withdrawals", u, map[string]any{"asset": "ETH", "amount": "0.001",
		"address": evm.Checksummed(anviltest.Addr(0x3200 + v.r.IntN(8))), "cid": cid})
	switch {
	case err != nil || svUnknown(st, b) || (st == 202 && b["state"] == "UNKNOWN"):
		v.wds[cid] = "UNKNOWN"
	case st == 202:
		v.wds[cid] = "ACCEPTED"
		v.acked++
	default:
		v.wds[cid] = "NONE"
	}
	v.wdUser[cid] = u
	v.log("withdrawal", "user %d 0.001 ETH cid %s: %d %v %v %v -> %s", u, cid, st, b["state"], b["code"], err, v.wds[cid])
}

// p2pCreate creates a spec 003 transfer between two of its users.
func (v *soak) p2pCreate() {
	i := v.r.IntN(svP2PUsers)
	j := (i + 1 + v.r.IntN(svP2PUsers-1)) % svP2PUsers
	amount := float64(1+v.r.IntN(500)) / 100
	if v.r.IntN(25) == 0 {
		amount = 1e6 // beyond the balance: refused
	}
	body := map[string]any{"fromUserId": v.p2pHandles[i], "toUserId": v.p2pHandles[j], "amount": amount,
		"requestId": fmt.Sprintf("sv%d-p%d", v.seed, v.n)}
	st, b, err := v.call("POST", "/transfers", uint64(svP2PFirst+i), body)
	switch {
	case err != nil || (st >= 500 && !svNotApplied(st, b)):
		v.p2pMaybe++
	case st == 200:
		v.p2p[fmt.Sprint(b["transferId"])] = &svP2P{told: "PENDING"}
		v.acked++
	}
	v.log("p2p transfer", "%v: %d %v %v %v", body, st, b["transferId"], b["code"], err)
}

// p2pCancel cancels a spec 003 transfer told PENDING (it may have executed).
func (v *soak) p2pCancel() {
	var ids []string
	for id, p := range v.p2p {
		if p.told == "PENDING" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		v.p2pHistory()
		return
	}
	sort.Strings(ids)
	tid := ids[v.r.IntN(len(ids))]
	st, b, err := v.call("POST", "/transfers/"+tid+"/cancel", svAdmin, nil)
	switch {
	case err != nil:
	case st == 200 && b["status"] == "CANCELLED":
		v.p2p[tid].told = "CANCELLED"
		v.acked++
	case st == 400:
		v.p2p[tid].told = "COMPLETED" // CANNOT_CANCEL_TRANSFER: it executed
	}
	v.log("p2p cancel", "%s: %d %v %v %v", tid, st, b["status"], b["code"], err)
}

// p2pHistory reads a history page of a spec 003 user.
func (v *soak) p2pHistory() {
	h := v.p2pHandles[v.r.IntN(svP2PUsers)]
	st, b, err := v.call("GET", fmt.Sprintf("/transfers?userId=%s&page=%d&size=5", h, 1+v.r.IntN(3)), svAdmin, nil)
	v.log("p2p history", "%s: %d %v %v", h, st, b["totalElements"], err)
}

// haltResume halts ETH-USDT by hand, or resumes it.
func (v *soak) haltResume() {
	m := "ETH-USDT"
	action, status := "halt", "HALTED"
	if v.spotMarkets[m] == "HALTED" {
		action, status = "resume", "ACTIVE"
	}
	st, b, err := v.call("POST", "/admin/v1/markets/"+m+"/"+action, svAdmin, nil)
	switch {
	case err != nil, svUnknown(st, b):
		v.spotMarkets[m] = "?"
	case st == 200:
		v.spotMarkets[m] = status
		v.acked++
	}
	v.log("operator halt", "%s %s: %d %v %v", m, action, st, b["code"], err)
}

// fault injects a fault in turn: a negative balance (the core check halts
// the core; the operator repairs the balance and resolves the core's
// breaker), a drifted level total of BTC-USDT or of an ACTIVE binary
// market (ORDERBOOK_DESYNC halts the market; the operator resolves it with
// a rebuild of the book). The venue is used while halted.
func (v *soak) fault() {
	limit := 3
	if !v.short {
		limit = 12
	}
	if v.coreHalted || v.desync != "" || v.faults >= limit || time.Since(v.lastFault) < v.dur/time.Duration(limit+1) {
		v.read() // spread over the run
		return
	}
	v.lastFault = time.Now()
	v.faults++ // before the call: a repair's refs are the fault's own
	var body map[string]any
	switch v.faults % 3 {
	case 1:
		body = map[string]any{"fault": "negative_balance", "user_id": svFaulty, "asset": "BTC", "amount": "2"}
		v.coreHalted = true
	case 2:
		body = map[string]any{"fault": "level_drift", "market": "BTC-USDT", "side": []string{"BUY", "SELL"}[v.r.IntN(2)], "amount": "0.01"}
		v.desync = "BTC-USDT"
	default:
		for _, m := range v.binaries {
			if m.status == "ACTIVE" && !m.unknown {
				body = map[string]any{"fault": "level_drift", "market": fmt.Sprint(m.id), "side": "BUY", "amount": "2"}
				v.desync = fmt.Sprint(m.id)
				break
			}
		}
		if body == nil {
			v.log("fault", "no ACTIVE binary market to drift")
			return
		}
	}
	st, b, err := v.call("POST", "/admin/v1/faults/core", svAdmin, body)
	v.log("fault", "%v: %d %v %v", body, st, b["code"], err)
	if b["code"] == "ORDER_NOT_FOUND" && body["side"] == "BUY" && v.desync == "BTC-USDT" { // no bid level: drift an ask
		body["side"] = "SELL"
		st, b, err = v.call("POST", "/admin/v1/faults/core", svAdmin, body)
		v.log("fault", "%v: %d %v %v", body, st, b["code"], err)
	}
	if err == nil && st != 200 && !svUnknown(st, b) { // refused: nothing to repair
		v.coreHalted, v.desync = false, ""
		return
	}
	if err == nil && st == 200 {
		v.acked++
	}
	v.waitHalt(5 * time.Second)
	for i := 0; i < 3; i++ { // the venue answers while halted
		v.spotOrder()
		v.p2pCreate()
		v.binaryOrder()
	}
	v.repair()
}

// waitHalt waits until the injected fault's halt shows in health/matching.
func (v *soak) waitHalt(d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		_, h, err := v.call("GET", "/api/v1/health/matching", 0, nil)
		if err != nil {
			return false
		}
		if v.coreHalted && h["core_halted"] == true {
			return true
		}
		if m, _ := h["markets"].(map[string]any)[v.desync].(map[string]any); v.desync != "" && m["status"] == "HALTED" {
			return true
		}
	}
	return false
}

// repair resolves whichever injected fault is open.
func (v *soak) repair() {
	if v.coreHalted {
		v.resolveFault()
	}
	if v.desync != "" {
		st, b, err := v.call("POST", "/admin/v1/markets/"+v.desync+"/breaker/resolve", svAdmin,
			map[string]any{"target_status": "ACTIVE", "rebuild": true, "note": "venue soak: drifted level rebuilt"})
		v.log("fault", "%s resolved with a rebuild: %d %v %v %v", v.desync, st, b["status"], b["code"], err)
		if err == nil && (st == 200 || b["code"] == "NOT_HALTED") {
			v.desync = ""
		}
	}
}

// resolveFault repairs the injected negative balance and lifts the core's
// breaker (the adjustments' refs make a retry after a lost answer a no-op).
func (v *soak) resolveFault() {
	k := v.faults
	for _, a := range []map[string]any{{"user_id": svFaulty, "asset": "BTC", "amount": "2", "ref": fmt.Sprintf("sv-fix-user-%d", k)},
		{"user_id": 0, "asset": "BTC", "amount": "-2", "ref": fmt.Sprintf("sv-fix-fee-%d", k)}} {
		if st, b, err := v.call("POST", "/admin/v1/adjust", svAdmin, a); err != nil || st != 200 {
			v.log("fault", "repair %v: %d %v %v", a, st, b, err)
			return
		}
	}
	st, b, err := v.call("POST", "/admin/v1/core/breaker/resolve", svAdmin, map[string]any{"note": "venue soak: repaired"})
	v.log("fault", "repaired, core breaker resolve: %d %v %v", st, b["code"], err)
	if err == nil && (st == 200 || b["code"] == "NOT_HALTED") {
		v.coreHalted = false
	}
}

// read is a client reading its state (balances, depth).
func (v *soak) read() {
	u := svTraders[v.r.IntN(len(svTraders))]
	st, _, err := v.call("GET", "/api/v1/balances", u, nil)
	v.log("read", "balances %d: %d %v", u, st, err)
}

// checkStream reads the soak's JetStream stream back once the publisher has
// caught up: every message id (seq-index) once, in order.
func (v *soak) checkStream() {
	if v.js == nil {
		return
	}
	t := v.t
	deadline := time.Now().Add(30 * time.Second)
	for v.s.metric("ubs_publisher_lag_commands") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("publisher lag %v after 30 s", v.s.metric("ubs_publisher_lag_commands"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if g := v.s.metric("ubs_publisher_gap_commands_total"); g != 0 {
		v.lost++
		t.Errorf("publisher: %v commands never published", g)
	}
	ctx := context.Background()
	st, err := v.js.Stream(ctx, v.stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prevSeq, prevIdx, n := uint64(0), -1, 0
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		seqOf, idx, ok := publish.ParseMsgID(m.Header.Get(jetstream.MsgIDHeader))
		cs := uint64(seqOf)
		if !ok || cs < prevSeq || (cs == prevSeq && idx <= prevIdx) {
			v.contra++
			t.Errorf("stream message %d: id %q after %d-%d: not once, in order", seq, m.Header.Get(jetstream.MsgIDHeader), prevSeq, prevIdx)
		}
		prevSeq, prevIdx = cs, idx
		n++
	}
	if n == 0 {
		t.Errorf("the stream is empty")
	}
	v.events["stream messages"] = n
}
