package gateway

// This file proves the operator side of spec 004 at the HTTP edge: §5.5
// breaker resolution (market: refused while the book is broken, cancel_all
// in slices, SUSPENDED then ACTIVE; core: repairs by adjustment, then the
// resolution), GET /admin/v1/circuit-breaker, and §7.3 GET
// /api/v1/health/matching (public, degraded while something is halted).

import (
	"testing"

	"github.com/ubscore/ubscore/core"
)

func newBreakerHarness(t *testing.T) *harness {
	log := &BreakerLog{}
	var be *fakeBackend
	h := newHarness(t, func(c *ServerConfig) {
		be = newFakeBackendCfg(t, c.Registry, core.Config{AllowFaults: true})
		be.brk = log
		c.Backend, c.Breakers = be, log
	})
	h.be = be
	return h
}

// submitCore applies a command directly (faults, ticks: not HTTP endpoints).
func (h *harness) submitCore(c core.Command) core.Event {
	h.t.Helper()
	evs, err := h.be.Submit(&c, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs[len(evs)-1]
}

func TestSpec5_ResolveMarketBreakerOverHTTP(t *testing.T) {
	h := newBreakerHarness(t)
	h.fund(1, "BTC", "10")
	h.fund(2, "USDT", "100000")
	alice, bob := h.token(1), h.token(2)
	for _, px := range []string{"50000", "50000", "50100"} {
		h.ok("POST", "/api/v1/order", alice, orderBody("side", "SELL", "price", px))
	}
	h.ok("POST", "/api/v1/order", bob, orderBody("price", "49000"))
	h.ok("POST", "/api/v1/order", bob, orderBody("market", "ETH-USDT", "price", "1000"))
	if r := h.submitCore(core.Command{Kind: core.KindFault, Flags: uint8(core.FaultLevelDrift), Market: 1, Side: core.Sell, Amount: 7}); r.Code != core.OK {
		t.Fatal(r.Code)
	}
	h.submitCore(core.Command{Kind: core.KindTick, Flags: core.TickFullCheck})

	out := h.ok("GET", "/admin/v1/circuit-breaker", h.admin, "")
	open := list(t, out["open"])
	if len(open) != 1 || obj(t, open[0])["market_id"] != "BTC-USDT" || obj(t, open[0])["trigger_reason"] != "ORDERBOOK_DESYNC" ||
		obj(t, out["core"])["halted"] != false {
		t.Fatalf("circuit-breaker %v", out)
	}
	health := h.ok("GET", "/api/v1/health/matching", "", "")
	if health["status"] != "degraded" || num(t, health["halted_markets"]) != 1 || num(t, health["active_markets"]) != 1 ||
		obj(t, obj(t, health["markets"])["BTC-USDT"])["status"] != "HALTED" {
		t.Fatalf("health %v", health)
	}
	h.fails("POST", "/api/v1/order", alice, orderBody("side", "SELL", "price", "51000"), 409, "MARKET_HALTED")
	h.ok("POST", "/api/v1/order", bob, orderBody("market", "ETH-USDT", "price", "1001")) // the other market trades

	path := "/admin/v1/markets/BTC-USDT/breaker/resolve"
	h.fails("POST", path, h.token(9), `{"target_status":"ACTIVE"}`, 403, "FORBIDDEN")
	h.fails("POST", path, h.admin, `{"target_status":"HALTED"}`, 400, "INVALID_STATUS")
	h.fails("POST", path, h.admin, `{}`, 400, "MISSING_FIELD")
	h.fails("POST", path, h.admin, `{"target_status":"ACTIVE","cancel_all":"yes"}`, 400, "INVALID_FIELD_TYPE")
	h.fails("POST", path, h.admin, `{"target_status":"ACTIVE","note":"bad\u0007"}`, 400, "INVALID_PARAMETER")
	h.fails("POST", path, h.admin, `{"target_status":"ACTIVE","note":"looks fine"}`, 409, "INVARIANT_VIOLATION")
	got := h.ok("POST", path, h.admin, `{"target_status":"SUSPENDED","note":"drifted ask level; book cleared","cancel_all":true}`)
	if got["status"] != "SUSPENDED" || num(t, got["cancelled_orders"]) != 4 {
		t.Fatalf("resolve %v", got)
	}
	for _, u := range []uint64{1, 2} {
		for _, a := range []core.AssetID{1, 2} {
			if b := h.balance(u, a); b.Frozen != 0 && !(u == 2 && a == 1) {
				t.Fatalf("user %d asset %d frozen %+v", u, a, b)
			}
		}
	}
	h.fails("POST", "/api/v1/order", alice, orderBody("side", "SELL"), 409, "MARKET_SUSPENDED")
	h.fails("POST", path, h.admin, `{"target_status":"ACTIVE"}`, 409, "NOT_HALTED")
	h.ok("POST", "/admin/v1/markets/BTC-USDT/resume", h.admin, "")
	h.ok("POST", "/api/v1/order", alice, orderBody("side", "SELL"))
	if health := h.ok("GET", "/api/v1/health/matching", "", ""); health["status"] != "healthy" {
		t.Fatalf("health %v", health)
	}
	ev := list(t, h.ok("GET", "/admin/v1/circuit-breaker", h.admin, "")["events"])
	e := obj(t, ev[0])
	if len(ev) != 1 || e["resolved_by"] != "1000" || e["resolution_note"] != "drifted ask level; book cleared" ||
		e["resolved_status"] != "SUSPENDED" || obj(t, e["context"])["command"] != "TICK" {
		t.Fatalf("events %v", ev)
	}
	// A manual halt is a breaker event too.
	h.ok("POST", "/admin/v1/markets/ETH-USDT/halt", h.admin, "")
	ev = list(t, h.ok("GET", "/admin/v1/circuit-breaker", h.admin, "")["events"])
	if e := obj(t, ev[0]); e["trigger_reason"] != "MANUAL_HALT" || num(t, obj(t, e["context"])["by_user"]) != 1000 {
		t.Fatalf("manual halt event %v", ev[0])
	}
}

func TestSpec5_ResolveCoreBreakerOverHTTP(t *testing.T) {
	h := newBreakerHarness(t)
	h.fund(1, "BTC", "10")
	alice := h.token(1)
	h.ok("POST", "/api/v1/order", alice, orderBody("side", "SELL"))
	h.submitCore(core.Command{Kind: core.KindFault, Flags: uint8(core.FaultStrayFrozen), User: 1, Asset: 2, Amount: 30_000})
	h.submitCore(core.Command{Kind: core.KindTick, Flags: core.TickFullCheck})
	if health := h.ok("GET", "/api/v1/health/matching", "", ""); health["status"] != "degraded" || health["core_halted"] != true {
		t.Fatalf("health %v", health)
	}
	h.fails("POST", "/api/v1/order", alice, orderBody("side", "SELL"), 503, "CORE_HALTED")
	h.fails("POST", "/admin/v1/core/breaker/resolve", h.admin, `{"note":"too early"}`, 409, "INVARIANT_VIOLATION")
	h.fails("POST", "/admin/v1/adjust", h.admin, `{"user_id":1,"asset":"BTC","amount":"-0.0003","ref":"r1","balance":"spot"}`,
		400, "INVALID_PARAMETER")
	if out := h.ok("POST", "/admin/v1/adjust", h.admin, `{"user_id":1,"asset":"BTC","amount":"-0.0003","ref":"r1","balance":"frozen"}`); out["balance"] != "frozen" {
		t.Fatalf("adjust %v", out)
	}
	h.ok("POST", "/admin/v1/adjust", h.admin, `{"user_id":1,"asset":"BTC","amount":"0.0003","ref":"r2"}`)
	out := h.ok("POST", "/admin/v1/core/breaker/resolve", h.admin, `{"note":"stray frozen funds released"}`)
	if out["core_halted"] != false {
		t.Fatalf("resolve %v", out)
	}
	h.fails("POST", "/admin/v1/core/breaker/resolve", h.admin, ``, 409, "NOT_HALTED")
	h.ok("POST", "/api/v1/order", alice, orderBody("side", "SELL"))
	ev := list(t, h.ok("GET", "/admin/v1/circuit-breaker", h.admin, "")["events"])
	if e := obj(t, ev[0]); e["market_id"] != "*" || e["trigger_reason"] != "INVARIANT_BALANCE" ||
		e["resolution_note"] != "stray frozen funds released" {
		t.Fatalf("events %v", ev)
	}
}

// TestSpec7_HealthMatchingIsPublic: no token needed, healthy by default,
// 503 when the core does not answer.
func TestSpec7_HealthMatchingIsPublic(t *testing.T) {
	h := newBreakerHarness(t)
	out := h.ok("GET", "/api/v1/health/matching", "", "")
	m := obj(t, obj(t, out["markets"])["ETH-USDT"])
	if out["status"] != "healthy" || num(t, out["halted_markets"]) != 0 || num(t, out["active_markets"]) != 2 ||
		m["status"] != "ACTIVE" || m["orderbook_loaded"] != true || num(t, m["order_count"]) != 0 {
		t.Fatalf("health %v", out)
	}
	h.fails("GET", "/api/v1/health", "", "", 401, "UNAUTHORIZED") // only the matching health is public under /api
	h.be.down.Store(true)
	h.fails("GET", "/api/v1/health/matching", "", "", 503, "SERVICE_UNAVAILABLE")
}

// TestBreakerLogBounded: the log keeps MaxBreakerEvents, dropping the
// oldest resolved first and keeping open ones.
func TestBreakerLogBounded(t *testing.T) {
	var l BreakerLog
	trip := func(seq core.Seq, m core.MarketID) {
		l.Apply(&core.Command{Kind: core.KindHaltMarket}, []core.Event{{Seq: seq, Kind: core.EvMarketHalted, Market: m,
			Detail: uint8(core.ReasonManualHalt)}})
	}
	trip(1, 1) // stays open
	seq := core.Seq(1)
	for i := 0; i < MaxBreakerEvents+10; i++ {
		trip(seq+1, 2)
		l.Apply(&core.Command{Kind: core.KindResumeMarket}, []core.Event{{Seq: seq + 2, Kind: core.EvMarketResumed, Market: 2}})
		seq += 2
	}
	ev := l.Events()
	if len(ev) != MaxBreakerEvents || ev[len(ev)-1].Trip.Market != 1 || ev[len(ev)-1].Resolution != nil ||
		ev[0].Trip.Seq != seq-1 || ev[0].Resolution == nil || ev[0].Resolution.Seq != seq {
		t.Fatalf("%d events, oldest %+v, newest %+v", len(ev), ev[len(ev)-1], ev[0])
	}
}

// TestBreakerLogReplayOrder: the start-up warm-up replays older commands
// after recovery's own live trips; they land in seq order and an old
// resolution never resolves the newer trip.
func TestBreakerLogReplayOrder(t *testing.T) {
	var l BreakerLog
	alerts := 0
	l.OnChange = func(core.BreakerChange) { alerts++ }
	halt := func(seq core.Seq) []core.Event {
		return []core.Event{{Seq: seq, Kind: core.EvMarketHalted, Market: 1, Detail: uint8(core.ReasonRecoveryFailed)}}
	}
	l.Apply(&core.Command{Kind: core.KindBreakerTrip}, halt(100))
	l.Replay(&core.Command{Kind: core.KindHaltMarket}, halt(10))
	l.Replay(&core.Command{Kind: core.KindResumeMarket}, []core.Event{{Seq: 20, Kind: core.EvMarketResumed, Market: 1}})
	ev := l.Events()
	if len(ev) != 2 || ev[0].Trip.Seq != 100 || ev[0].Resolution != nil || ev[1].Trip.Seq != 10 ||
		ev[1].Resolution == nil || alerts != 1 {
		t.Fatalf("events %+v, alerts %d", ev, alerts)
	}
}
