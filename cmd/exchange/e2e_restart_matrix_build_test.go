package main

// How TestRestartMatrix builds its venue: every kind of state over HTTP,
// each operation's answer recorded as what the client was told.

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/pgtest"
)

// Users of the matrix (ids of their own, apart from the other tests').
const (
	rmMaker  = 131 // spot and binary traders
	rmTaker  = 132
	rmThird  = 133
	rmFaulty = 134 // the negative balance that halts the core
	rmFrozen = 135 // SPOT account FROZEN
	rmXfer   = 141 // internal transfers
	rmOff    = 142 // FUNDING account DISABLED
	rmWd     = 151 // the withdrawal
	rmAlice  = 161 // spec 003 users
	rmBob    = 162
	rmBinary = 61 // the binary market's id
)

func rmBuild(t *testing.T) *rmVenue {
	node, chain := rmAnvil(t)
	v := &rmVenue{t: t, dir: t.TempDir(), pg: pgtest.NewDB(t), node: node, orders: map[uint64]rmOrder{},
		p2pTold: map[string]string{}, p2pBalance: map[string][3]int64{}, xUser: rmXfer, wUser: rmWd,
		haltedSpot: "ETH-USDT", binary: rmBinary}
	v.flags = append([]string{"--enable-fault-injection", "--core-check-interval", "200ms", "--invariant-interval", "0",
		"--p2p-hold", "1h", "--p2p-retention", "2s", "--transfer-stale-after", "1s", "--transfer-rate-per-second", "0", "--transfer-per-day", "0"}, chain...)
	// A replicated primary (sync, on the machine's NATS): every restart of
	// the matrix is one of a replicated primary, which reads the log to its
	// end and claims it again before it serves.
	if repl, ok := systemReplication(t, "matrix"); ok {
		v.flags, v.replicated = append(v.flags, repl("matrix")...), true
	}
	d := v.start()
	t.Logf("first start (migrations included): ready %v after the process start", d.Round(time.Millisecond))
	if d > maxReady {
		t.Errorf("first start: ready %v after the process start, want <= %v", d, maxReady)
	}
	for _, u := range []uint64{rmMaker, rmTaker, rmThird, rmFaulty} {
		for _, a := range [][2]string{{"USDT", "100000"}, {"BTC", "1"}, {"ETH", "10"}} {
			v.ok(0, "POST", "/admin/v1/adjust", 1000, map[string]any{"user_id": u, "asset": a[0], "amount": a[1],
				"ref": fmt.Sprintf("rm-%d-%s", u, a[0])})
		}
	}
	// The internal transfer that will sit in rmPendingState is slow to
	// answer (~2 s): it runs beside the rest of the build.
	pending := v.xferStuck()
	v.spot()
	v.binaryMarket()
	v.accounts()
	v.p2p()
	v.withdrawal()
	a := <-pending
	if a.err != nil || a.st != 202 || a.b["state"] != rmPendingState {
		t.Fatalf("S->F transfer with its FUNDING side failing: %d %v %v, want 202 %s", a.st, a.b, a.err, rmPendingState)
	}
	v.xPending = reqIDOf(t, a.b)
	v.haltCore()
	v.want = v.snapshot()
	return v
}

// order places an order as user and records the answer.
func (v *rmVenue) order(user uint64, body map[string]any) map[string]any {
	v.t.Helper()
	o := v.ok(0, "POST", "/api/v1/order", user, body)
	v.orders[id(v.t, o["order_id"])] = rmOrder{user: user, status: o["status"].(string), filled: rmFilled(v.t, o)}
	return o
}

// rmRetryOrder is a resting order with a client_order_id, sent again
// after the restarts as a client that lost its answer would.
func rmRetryOrder() map[string]any {
	o := rmLimit("BTC-USDT", "BUY", "49000", "0.002")
	o["client_order_id"] = "rm-live-1"
	return o
}

// rmRetryP2P is a spec 003 transfer with a requestId, sent again after the
// restarts.
const rmRetryP2P = `{"fromUserId":"rm-bob","toUserId":"rm-alice","amount":2.25,"requestId":"rm-p1"}`

// rmFilled is an order answer's filled quantity: base units of a spot
// order ("filled_quantity", 8 decimals), shares of a binary one ("filled").
func rmFilled(t *testing.T, o map[string]any) int64 {
	t.Helper()
	if f, ok := o["filled"].(float64); ok {
		return int64(f)
	}
	return dec(t, o["filled_quantity"], 8)
}

// refuse places an order that must be refused with status and code.
func (v *rmVenue) refuse(user uint64, status int, code string, body map[string]any) {
	v.t.Helper()
	cid := fmt.Sprintf("rm-refused-%d", len(v.refused))
	body["client_order_id"] = cid
	st, b := v.s.do("POST", "/api/v1/order", v.s.token(user, false), body)
	wantCode(v.t, "refused order "+cid, st, b, status, code)
	v.refused = append(v.refused, rmRefused{user: user, cid: cid, status: status, code: code})
}

// rmLimit is a GTC limit order's body.
func rmLimit(market, side, price, qty string) map[string]any {
	return map[string]any{"market": market, "side": side, "type": "LIMIT", "time_in_force": "GTC", "price": price, "quantity": qty}
}

// spot rests orders on both sides of BTC-USDT and ETH-USDT, some partly
// filled, cancels one, has some refused, and halts ETH-USDT.
func (v *rmVenue) spot() {
	v.t.Helper()
	sell := v.order(rmMaker, rmLimit("BTC-USDT", "SELL", "50000", "0.01"))
	v.order(rmTaker, rmLimit("BTC-USDT", "BUY", "50000", "0.004")) // fills 0.004 of the SELL
	v.retryOrder = id(v.t, v.order(rmTaker, rmRetryOrder())["order_id"])
	mod := v.order(rmThird, rmLimit("BTC-USDT", "BUY", "48900", "0.003"))
	mid := id(v.t, mod["order_id"])
	mod = v.ok(0, "PATCH", fmt.Sprint("/api/v1/order/", mid), rmThird, map[string]any{"price": "48950", "quantity": "0.0025"})
	if id(v.t, mod["order_id"]) != mid || mod["price"] != "48950.000000" || mod["quantity"] != "0.00250000" {
		v.t.Fatalf("modify: %v", mod)
	}
	v.orders[mid] = rmOrder{user: rmThird, status: mod["status"].(string), filled: rmFilled(v.t, mod)}
	ioc := rmLimit("BTC-USDT", "BUY", "45000", "0.001")
	ioc["time_in_force"] = "IOC"
	v.order(rmThird, ioc) // nothing to take: it ends at once
	v.order(rmThird, rmLimit("BTC-USDT", "SELL", "51000", "0.001"))
	c := v.order(rmTaker, rmLimit("BTC-USDT", "BUY", "48000", "0.001"))
	cid := id(v.t, c["order_id"])
	if o := v.ok(0, "DELETE", fmt.Sprint("/api/v1/order/", cid), rmTaker, nil); o["status"] != "CANCELLED" {
		v.t.Fatalf("cancel: %v", o)
	}
	v.orders[cid] = rmOrder{user: rmTaker, status: "CANCELLED"}
	v.order(rmMaker, rmLimit("ETH-USDT", "SELL", "3000", "0.1"))
	v.order(rmTaker, rmLimit("ETH-USDT", "BUY", "3000", "0.05")) // fills half of it
	v.order(rmThird, rmLimit("ETH-USDT", "BUY", "2900", "0.02"))
	if o := v.ok(0, "GET", fmt.Sprint("/api/v1/order/", id(v.t, sell["order_id"])), rmMaker, nil); o["status"] != "PARTIALLY_FILLED" {
		v.t.Fatalf("the BTC-USDT SELL is not partly filled: %v", o)
	}
	v.refuse(rmThird, 409, "INSUFFICIENT_BALANCE", rmLimit("BTC-USDT", "BUY", "50000", "100"))
	v.refuse(rmThird, 400, "INVALID_PRICE", rmLimit("BTC-USDT", "BUY", "50000.001", "0.001"))
	v.ok(0, "POST", "/admin/v1/markets/"+v.haltedSpot+"/halt", 1000, nil)
	v.refuse(rmThird, 409, "MARKET_HALTED", rmLimit(v.haltedSpot, "BUY", "2950", "0.01"))
}

// accounts freezes a SPOT account and disables a FUNDING one, each
// refusing what it must.
func (v *rmVenue) accounts() {
	v.t.Helper()
	v.ok(0, "POST", "/admin/v1/adjust", 1000, map[string]any{"user_id": rmFrozen, "asset": "USDT", "amount": "1000", "ref": "rm-frozen"})
	if b := v.ok(0, "POST", fmt.Sprintf("/admin/v1/accounts/%d/status", rmFrozen), 1000, map[string]any{"status": "FROZEN"}); b["status"] != "FROZEN" {
		v.t.Fatalf("freeze: %v", b)
	}
	v.refuse(rmFrozen, 409, "ACCOUNT_FROZEN", rmLimit("BTC-USDT", "BUY", "48000", "0.001"))
	x := newXT(v.t, v.s, v.pg)
	x.deposit(rmOff, "USDT", "10")
	x.setStatus(F, rmOff, "USDT", "DISABLED")
	x.refused("F->S from a DISABLED FUNDING account", rmOff, xferBody(F, S, "USDT", "5"), 400, "ACCOUNT_DISABLED")
}

// binaryMarket trades a binary market, resolves it and settles one slice.
func (v *rmVenue) binaryMarket() {
	v.t.Helper()
	m := v.binary
	v.ok(0, "POST", "/admin/v1/binary-markets", 1000, map[string]any{"market_id": m, "quote": "USDT", "taker_fee_ppm": 2000,
		"question": "Does the restart matrix pass?"})
	v.ok(0, "POST", fmt.Sprintf("/admin/v1/binary-markets/%d/activate", m), 1000, nil)
	bo := func(u uint64, outcome, price string, qty int) {
		v.order(u, map[string]any{"market": strconv.Itoa(m), "outcome": outcome, "side": "BUY", "type": "LIMIT",
			"price": price, "quantity": strconv.Itoa(qty)})
	}
	bo(rmMaker, "YES", "0.50", 20)
	bo(rmTaker, "NO", "0.50", 10)
	bo(rmThird, "NO", "0.50", 10)
	bo(rmMaker, "YES", "0.10", 5) // cancelled by the resolve
	v.ok(0, "POST", fmt.Sprintf("/admin/v1/binary-markets/%d/resolve", m), 1000, map[string]any{"outcome": "YES"})
	if b := v.ok(0, "POST", fmt.Sprintf("/admin/v1/binary-markets/%d/settle", m), 1000, map[string]any{"limit": 1}); b["status"] != "RESOLVED" || b["settling"] != true {
		v.t.Fatalf("after one settle slice: %v", b)
	}
	v.binaryState = "RESOLVED"
}

// p2p creates spec 003 users and transfers that stay on hold (1 h): two
// pending, one cancelled, one refused.
func (v *rmVenue) p2p() {
	v.t.Helper()
	for i, u := range []string{`{"userId":"rm-alice","initialBalance":100,"id":161}`, `{"userId":"rm-bob","initialBalance":5.5,"id":162}`} {
		v.ok(0, "POST", "/balance-service/users", 1000, u)
		v.p2pUsers = append(v.p2pUsers, []string{"rm-alice", "rm-bob"}[i])
	}
	tr := func(from uint64, body string) string {
		b := v.ok(0, "POST", "/transfers", from, body)
		tid := fmt.Sprint(b["transferId"])
		v.p2pTold[tid] = "PENDING"
		return tid
	}
	tr(rmAlice, `{"fromUserId":"rm-alice","toUserId":"rm-bob","amount":10}`)
	v.retryP2P = tr(rmBob, rmRetryP2P)
	c := tr(rmAlice, `{"fromUserId":"rm-alice","toUserId":"rm-bob","amount":7}`)
	if b := v.ok(0, "POST", "/transfers/"+c+"/cancel", rmAlice, nil); b["status"] != "CANCELLED" {
		v.t.Fatalf("p2p cancel: %v", b)
	}
	v.p2pTold[c] = "CANCELLED"
	// Read now, while the core most likely still holds the cancelled one
	// (--p2p-retention 2s); the checks after the restarts read it from
	// Postgres once forgotten (rmWaitForgotten) and must get the same.
	v.p2pPages = map[string]any{}
	for _, h := range v.p2pUsers {
		_, b := v.s.do("GET", "/transfers?userId="+h+"&page=1&size=10", v.admin, nil)
		v.p2pPages[h] = b
	}
	v.ok(400, "POST", "/transfers", rmBob, `{"fromUserId":"rm-bob","toUserId":"rm-alice","amount":50}`) // INSUFFICIENT_BALANCE
	// [balance, available, held] in cents: the pending amounts are held.
	v.p2pBalance["rm-alice"] = [3]int64{10000, 9000, 1000}
	v.p2pBalance["rm-bob"] = [3]int64{550, 325, 225}
}

// xferStuck makes the FUNDING side of rmXfer's transfers fail (a Postgres
// trigger, as FND-006 does: it stays across restarts), commits one
// FUNDING->SPOT transfer first, has one refused, and posts a SPOT->FUNDING
// one whose answer (202 rmPendingState after ~2 s) it returns.
func (v *rmVenue) xferStuck() <-chan answer {
	v.t.Helper()
	x := newXT(v.t, v.s, v.pg)
	x.deposit(rmXfer, "USDT", "100")
	x.credit(rmXfer, "USDT", "50")
	v.xCommitted = reqIDOf(v.t, x.commit(rmXfer, F, S, "USDT", "10", "cid", "rm-x1"))
	st, b := x.xfer(rmXfer, F, S, "USDT", "1000")
	wantCode(v.t, "internal transfer beyond the balance", st, b, 400, "INSUFFICIENT_BALANCE")
	v.xTrigger = fmt.Sprintf("xtest_rm_fail_%d", rmXfer)
	x.exec(fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger AS $$
		BEGIN
			IF NEW.user_id = %d THEN RAISE EXCEPTION 'xtest: the FUNDING side of this user fails'; END IF;
			RETURN NEW;
		END $$ LANGUAGE plpgsql`, v.xTrigger, rmXfer))
	x.exec(fmt.Sprintf(`CREATE TRIGGER %s BEFORE INSERT ON transfer_operations FOR EACH ROW EXECUTE FUNCTION %s()`,
		v.xTrigger, v.xTrigger))
	out := make(chan answer, 1)
	s, tok := v.s, v.s.token(rmXfer, false)
	go func() {
		st, b, err := s.tryDo("POST", "/api/v1/internal_transfer", tok, xferBody(S, F, "USDT", "30"))
		out <- answer{st: st, b: b, err: err}
	}()
	return out
}

// withdrawal deposits ETH to FUNDING and withdraws part of it; with
// automine off its tx is broadcast and never mined: in flight.
func (v *rmVenue) withdrawal() {
	v.t.Helper()
	x := newXT(v.t, v.s, v.pg)
	x.deposit(rmWd, "ETH", "1")
	v.wTo = anviltest.Addr(0x32)
	tok := v.s.token(rmWd, false)
	if st, b := v.s.do("POST", "/api/v1/withdrawals", tok, map[string]any{"asset": "ETH", "amount": "0.25", "address": "0xnot"}); st != 400 || b["code"] != "INVALID_ADDRESS" {
		v.t.Fatalf("bad address: %d %v", st, b)
	}
	w := v.ok(202, "POST", "/api/v1/withdrawals", rmWd, map[string]any{"asset": "ETH", "amount": "0.25", "address": evm.Checksummed(v.wTo), "cid": "rm-w1"})
	if w["state"] != "PENDING" {
		v.t.Fatalf("withdraw: %v", w)
	}
	v.wID = fmt.Sprint(w["withdrawal_id"])
	v.poll("withdrawal TRACKING", 20*time.Second, func() bool {
		_, b := v.s.do("GET", "/api/v1/withdrawals/"+v.wID, tok, nil)
		return b["tx_state"] == "TRACKING"
	})
}

// haltCore injects a negative balance; the periodic core check finds it
// and halts the core.
func (v *rmVenue) haltCore() {
	v.t.Helper()
	v.ok(0, "POST", "/admin/v1/faults/core", 1000, map[string]any{"fault": "negative_balance", "user_id": rmFaulty,
		"asset": "BTC", "amount": "2"})
	v.poll("core halted", 20*time.Second, func() bool {
		_, h := v.s.do("GET", "/api/v1/health/matching", "", nil)
		return h["core_halted"] == true
	})
	v.coreHalted = "NEGATIVE_BALANCE"
}

// rmPendingState is where a SPOT->FUNDING transfer whose FUNDING deposit
// keeps failing stays on the one (fused) path that production runs (issue
// 34): its SPOT withdraw is done, but SOURCE_DONE and TARGET_PENDING become
// durable only in the same transaction as the FUNDING deposit, so it
// stays SOURCE_PENDING and each retry repeats the SPOT withdraw, which
// answers its first outcome by req_id and moves nothing again. (Before
// issue 34 a fault-injecting server ran the unfused path, which wrote
// TARGET_PENDING first.)
const rmPendingState = "SOURCE_PENDING"
