package gateway

// These tests prove every endpoint's happy path against a real core: orders
// cross at the maker's price with exact balances and fees, the answers agree
// with the core's state, History serves finished orders and trades, a
// repeated client_order_id returns the live order without a second one,
// admin actions apply (and adjust is idempotent by ref), and health tracks
// halts.

import (
	"strings"
	"testing"

	"github.com/ubscore/ubscore/core"
)

const (
	usdt = core.AssetID(1)
	btc  = core.AssetID(2)
	eth  = core.AssetID(3)
)

func TestOrderLifecycle(t *testing.T) {
	h := newHarness(t)
	h.fund(1, "BTC", "10")
	h.fund(2, "USDT", "1000000")
	u1, u2 := h.token(1), h.token(2)

	sell := h.ok("POST", "/api/v1/order", u1, orderBody("side", "SELL", "quantity", "1", "client_order_id", "s-1"))
	if sell["status"] != "NEW" || sell["client_order_id"] != "s-1" || sell["market"] != "BTC-USDT" ||
		sell["side"] != "SELL" || sell["type"] != "LIMIT" || sell["time_in_force"] != "GTC" ||
		sell["price"] != "50000.000000" || sell["quantity"] != "1.00000000" || sell["filled_quantity"] != "0.00000000" ||
		len(list(t, sell["fills"])) != 0 {
		t.Fatalf("sell: %v", sell)
	}
	sellID := num(t, sell["order_id"])
	if b := h.balance(1, btc); b != (core.Balance{Avail: 9_0000_0000, Frozen: 1_0000_0000}) {
		t.Fatalf("seller BTC after placing: %+v", b)
	}

	// The buy crosses at the maker's price 50000, not its own 50010.
	buy := h.ok("POST", "/api/v1/order", u2, orderBody("price", "50010", "quantity", "0.4"))
	if buy["status"] != "FILLED" || buy["filled_quantity"] != "0.40000000" || buy["client_order_id"] != nil {
		t.Fatalf("buy: %v", buy)
	}
	buyID := num(t, buy["order_id"])
	fills := list(t, buy["fills"])
	if len(fills) != 1 {
		t.Fatalf("fills: %v", fills)
	}
	f := obj(t, fills[0])
	if f["price"] != "50000.000000" || f["quantity"] != "0.40000000" || f["fee"] != "40.000000" ||
		f["fee_asset"] != "USDT" || num(t, f["maker_order_id"]) != sellID || num(t, f["taker_order_id"]) != buyID ||
		num(t, f["trade_id"]) != 1 {
		t.Fatalf("taker fill: %v", f)
	}
	// Notional 20000 USDT: the taker pays 0.2% = 40, the maker 0.1% = 20.
	for _, c := range []struct {
		user  uint64
		asset core.AssetID
		want  core.Balance
	}{
		{1, btc, core.Balance{Avail: 9_0000_0000, Frozen: 6000_0000}},
		{1, usdt, core.Balance{Avail: 19_980_000000}},
		{2, btc, core.Balance{Avail: 4000_0000}},
		{2, usdt, core.Balance{Avail: 979_960_000000}},
		{0, usdt, core.Balance{Avail: 60_000000}},
	} {
		if got := h.balance(c.user, c.asset); got != c.want {
			t.Fatalf("user %d asset %d: %+v, want %+v", c.user, c.asset, got, c.want)
		}
	}
	bal := h.ok("GET", "/api/v1/balances", u1, "")
	wantBal := map[string][2]string{"USDT": {"19980.000000", "0.000000"}, "BTC": {"9.00000000", "0.60000000"},
		"ETH": {"0.00000000", "0.00000000"}}
	bl := list(t, bal["balances"])
	if len(bl) != 3 {
		t.Fatalf("balances: %v", bal)
	}
	for _, e := range bl {
		m := obj(t, e)
		sp := obj(t, m["spot"])
		w := wantBal[m["asset"].(string)]
		if sp["available"] != w[0] || sp["frozen"] != w[1] {
			t.Fatalf("balance %v, want %v", m, w)
		}
	}

	depth := h.ok("GET", "/api/v1/depth/BTC-USDT?limit=5", u2, "")
	asks := list(t, depth["asks"])
	if len(list(t, depth["bids"])) != 0 || len(asks) != 1 || depth["market"] != "BTC-USDT" {
		t.Fatalf("depth: %v", depth)
	}
	if lv := list(t, asks[0]); lv[0] != "50000.000000" || lv[1] != "0.60000000" {
		t.Fatalf("ask level: %v", lv)
	}
	trades := list(t, h.ok("GET", "/api/v1/trades/BTC-USDT?limit=10", u2, "")["trades"])
	if len(trades) != 1 {
		t.Fatalf("trades: %v", trades)
	}
	if tr := obj(t, trades[0]); tr["price"] != "50000.000000" || tr["quantity"] != "0.40000000" ||
		tr["taker_side"] != "BUY" || num(t, tr["trade_id"]) != 1 || num(t, tr["time"]) == 0 {
		t.Fatalf("trade: %v", tr)
	}

	// The resting order, with its maker fill (maker fee).
	o := h.ok("GET", "/api/v1/order/"+itoa(int64(sellID)), u1, "")
	if o["status"] != "PARTIALLY_FILLED" || o["filled_quantity"] != "0.40000000" || o["client_order_id"] != "s-1" ||
		len(list(t, o["fills"])) != 1 || obj(t, list(t, o["fills"])[0])["fee"] != "20.000000" || o["fills_truncated"] != nil {
		t.Fatalf("sell order: %v", o)
	}
	// Another user's order does not exist for you; the finished taker comes from History.
	h.fails("GET", "/api/v1/order/"+itoa(int64(sellID)), u2, "", 404, "ORDER_NOT_FOUND")
	if o := h.ok("GET", "/api/v1/order/"+itoa(int64(buyID)), u2, ""); o["status"] != "FILLED" ||
		o["price"] != "50010.000000" || len(list(t, o["fills"])) != 1 {
		t.Fatalf("finished buy order: %v", o)
	}
	open := list(t, h.ok("GET", "/api/v1/orders?market=BTC-USDT&status=open", u1, "")["orders"])
	if len(open) != 1 || num(t, obj(t, open[0])["order_id"]) != sellID || obj(t, open[0])["fills"] != nil {
		t.Fatalf("open orders: %v", open)
	}
	if all := list(t, h.ok("GET", "/api/v1/orders", u1, "")["orders"]); len(all) != 1 {
		t.Fatalf("open orders of all markets: %v", all)
	}
	if none := list(t, h.ok("GET", "/api/v1/orders?market=BTC-USDT", u2, "")["orders"]); len(none) != 0 {
		t.Fatalf("user 2 has no open orders: %v", none)
	}

	// Modify: a smaller quantity keeps priority and releases base; a new price re-enters.
	m := h.ok("PATCH", "/api/v1/order/"+itoa(int64(sellID)), u1, `{"quantity":"0.8"}`)
	if m["quantity"] != "0.80000000" || m["filled_quantity"] != "0.40000000" || m["status"] != "PARTIALLY_FILLED" {
		t.Fatalf("modify quantity: %v", m)
	}
	if b := h.balance(1, btc); b != (core.Balance{Avail: 9_2000_0000, Frozen: 4000_0000}) {
		t.Fatalf("seller BTC after shrinking: %+v", b)
	}
	if m := h.ok("PATCH", "/api/v1/order/"+itoa(int64(sellID)), u1, `{"price":"50100.5"}`); m["price"] != "50100.500000" {
		t.Fatalf("modify price: %v", m)
	}
	h.fails("PATCH", "/api/v1/order/"+itoa(int64(sellID)), u2, `{"price":"50100"}`, 404, "ORDER_NOT_FOUND")

	c := h.ok("DELETE", "/api/v1/order/"+itoa(int64(sellID)), u1, "")
	if c["status"] != "CANCELLED" || c["filled_quantity"] != "0.40000000" || c["quantity"] != "0.80000000" ||
		c["price"] != "50100.500000" || c["client_order_id"] != "s-1" || len(list(t, c["fills"])) != 1 || c["reason"] != nil {
		t.Fatalf("cancel: %v", c)
	}
	if b := h.balance(1, btc); b != (core.Balance{Avail: 9_6000_0000}) {
		t.Fatalf("seller BTC after cancel: %+v", b)
	}
	if o := h.ok("GET", "/api/v1/order/"+itoa(int64(sellID)), u1, ""); o["status"] != "CANCELLED" {
		t.Fatalf("cancelled order from History: %v", o)
	}
	// A finished order of the caller is not open any more (issue 20): 409
	// ORDER_NOT_OPEN with the order as GET shows it; nothing changes.
	for _, c := range [][2]string{{"DELETE", ""}, {"PATCH", `{"price":"50000"}`}} {
		st, b := h.do(c[0], "/api/v1/order/"+itoa(int64(sellID)), u1, c[1])
		o, _ := b["order"].(map[string]any)
		if st != 409 || b["code"] != "ORDER_NOT_OPEN" || o == nil || o["status"] != "CANCELLED" ||
			num(t, o["order_id"]) != uint64(sellID) || o["filled_quantity"] != "0.40000000" {
			t.Fatalf("%s of a cancelled order: %d %v", c[0], st, b)
		}
	}
	if b := h.balance(1, btc); b != (core.Balance{Avail: 9_6000_0000}) {
		t.Fatalf("seller BTC after a refused cancel: %+v", b)
	}
	// Another user's finished order stays 404 (no existence oracle).
	h.fails("DELETE", "/api/v1/order/"+itoa(int64(sellID)), u2, "", 404, "ORDER_NOT_FOUND")
	h.fails("GET", "/api/v1/order/999999", u1, "", 404, "ORDER_NOT_FOUND")
	h.fails("GET", "/api/v1/order/abc", u1, "", 404, "ORDER_NOT_FOUND")
	h.fails("GET", "/api/v1/order/01", u1, "", 404, "ORDER_NOT_FOUND")

	// USDT is conserved: 1,000,000 in, spread over the two users and the fee account.
	if sum := h.balance(1, usdt).Avail + h.balance(2, usdt).Avail + h.balance(0, usdt).Avail; sum != 1_000_000_000000 {
		t.Fatalf("USDT not conserved: %d", sum)
	}
	// An admin reads the fee account (issue 20): every asset, as decimals.
	fees := h.ok("GET", "/admin/v1/fees", h.admin, "")
	fl := list(t, fees["fees"])
	if num(t, fees["user_id"]) != 0 || len(fl) != 3 || obj(t, fl[0])["asset"] != "USDT" ||
		obj(t, fl[0])["available"] != FormatUnits(int64(h.balance(0, usdt).Avail), 6) || h.balance(0, usdt).Avail == 0 ||
		obj(t, fl[1])["asset"] != "BTC" || obj(t, fl[1])["available"] != "0.00000000" {
		t.Fatalf("fees %v", fees)
	}
	h.fails("GET", "/admin/v1/fees", u1, "", 403, CodeForbidden)
}

func TestDuplicateClientOrderID(t *testing.T) {
	h := newHarness(t)
	h.fund(1, "BTC", "10")
	u1 := h.token(1)
	body := orderBody("side", "SELL", "quantity", "1", "client_order_id", "dup-1")
	first := h.ok("POST", "/api/v1/order", u1, body)
	before := h.balance(1, btc)
	again := h.ok("POST", "/api/v1/order", u1, body)
	if num(t, again["order_id"]) != num(t, first["order_id"]) || again["duplicate"] != true || first["duplicate"] != nil {
		t.Fatalf("duplicate: first %v, again %v", first, again)
	}
	// Even with other parameters: the id names the live order.
	other := h.ok("POST", "/api/v1/order", u1, orderBody("side", "SELL", "quantity", "2", "price", "60000", "client_order_id", "dup-1"))
	if num(t, other["order_id"]) != num(t, first["order_id"]) || other["quantity"] != "1.00000000" {
		t.Fatalf("duplicate with other parameters: %v", other)
	}
	if after := h.balance(1, btc); after != before {
		t.Fatalf("a duplicate froze funds: %+v -> %+v", before, after)
	}
	if open := list(t, h.ok("GET", "/api/v1/orders", u1, "")["orders"]); len(open) != 1 {
		t.Fatalf("a duplicate made a second order: %v", open)
	}
	// Another user may use the same client id.
	h.fund(2, "BTC", "1")
	if o := h.ok("POST", "/api/v1/order", h.token(2), body); o["duplicate"] != nil || num(t, o["order_id"]) == num(t, first["order_id"]) {
		t.Fatalf("user 2's own order: %v", o)
	}
	// Once the order is finished, the id is free again (the core only indexes live orders).
	h.ok("DELETE", "/api/v1/order/"+itoa(int64(num(t, first["order_id"]))), u1, "")
	if o := h.ok("POST", "/api/v1/order", u1, body); o["duplicate"] != nil || num(t, o["order_id"]) == num(t, first["order_id"]) {
		t.Fatalf("reuse after cancel: %v", o)
	}
}

func TestOrderTypes(t *testing.T) {
	h := newHarness(t)
	h.fund(1, "BTC", "10")
	h.fund(2, "USDT", "1000000")
	u1, u2 := h.token(1), h.token(2)
	h.ok("POST", "/api/v1/order", u1, orderBody("side", "SELL", "price", "50000", "quantity", "0.5"))
	h.ok("POST", "/api/v1/order", u1, orderBody("side", "SELL", "price", "50100", "quantity", "0.5"))

	// POST_ONLY that would take, FOK that cannot fill: 409, nothing changes.
	usdtBefore := h.balance(2, usdt)
	h.fails("POST", "/api/v1/order", u2, orderBody("time_in_force", "POST_ONLY", "price", "50000"), 409, "POST_ONLY_WOULD_TAKE")
	h.fails("POST", "/api/v1/order", u2, orderBody("time_in_force", "FOK", "price", "50000", "quantity", "0.6"), 409, "FOK_NOT_FILLED")
	if h.balance(2, usdt) != usdtBefore {
		t.Fatal("a rejected order moved funds")
	}
	// IOC: fills what crosses, the rest expires.
	ioc := h.ok("POST", "/api/v1/order", u2, orderBody("time_in_force", "IOC", "price", "50000", "quantity", "0.6"))
	if ioc["status"] != "EXPIRED" || ioc["filled_quantity"] != "0.50000000" || len(list(t, ioc["fills"])) != 1 {
		t.Fatalf("IOC: %v", ioc)
	}
	// MARKET BUY by quote budget, fee included: 1000 USDT buys 0.0199 BTC at
	// 50100 (996.99 + 1.99398 fee); 0.02 would cost 1002 + 2.004.
	mkt := h.ok("POST", "/api/v1/order", u2, orderBody("type", "MARKET", "time_in_force", nil, "price", nil,
		"quantity", nil, "quote_quantity", "1000"))
	if mkt["type"] != "MARKET" || mkt["time_in_force"] != "IOC" || mkt["price"] != nil || mkt["quantity"] != nil ||
		mkt["quote_quantity"] != "1000.000000" || mkt["status"] != "FILLED" {
		t.Fatalf("market by quote: %v", mkt)
	}
	if got := units(t, mkt["filled_quantity"], 8); got != 199_0000 {
		t.Fatalf("market by quote filled %d", got)
	}
	// MARKET SELL by quantity against a bid.
	h.ok("POST", "/api/v1/order", u2, orderBody("price", "49000", "quantity", "0.1"))
	ms := h.ok("POST", "/api/v1/order", u1, orderBody("type", "MARKET", "side", "SELL", "price", nil, "time_in_force", "IOC", "quantity", "0.05"))
	if ms["status"] != "FILLED" || ms["filled_quantity"] != "0.05000000" || obj(t, list(t, ms["fills"])[0])["price"] != "49000.000000" {
		t.Fatalf("market sell: %v", ms)
	}
	// MARKET on an empty side: NO_LIQUIDITY.
	h.fails("POST", "/api/v1/order", u2, orderBody("market", "ETH-USDT", "type", "MARKET", "time_in_force", nil, "price", nil), 409, "NO_LIQUIDITY")
	// Not enough funds.
	h.fails("POST", "/api/v1/order", u2, orderBody("quantity", "100"), 409, "INSUFFICIENT_BALANCE")
}

// Self-trade prevention cancels the user's own resting order; the cancelled
// order shows why.
func TestSelfTradeCancelReason(t *testing.T) {
	h := newHarness(t)
	h.fund(1, "BTC", "1")
	h.fund(1, "USDT", "100000")
	u1 := h.token(1)
	rest := h.ok("POST", "/api/v1/order", u1, orderBody("side", "SELL", "quantity", "0.1"))
	h.ok("POST", "/api/v1/order", u1, orderBody("quantity", "0.1"))
	o := h.ok("GET", "/api/v1/order/"+itoa(int64(num(t, rest["order_id"]))), u1, "")
	if o["status"] != "CANCELLED" || o["reason"] != "SELF_TRADE_PREVENTED" {
		t.Fatalf("STP-cancelled order: %v", o)
	}
}

func TestAdminEndpoints(t *testing.T) {
	h := newHarness(t)
	adj := `{"user_id":7,"asset":"USDT","amount":"100000","ref":"f7"}`
	first := h.ok("POST", "/admin/v1/adjust", h.admin, adj)
	if first["repeat"] != false || first["amount"] != "100000.000000" || first["ref"] != "f7" || num(t, first["user_id"]) != 7 {
		t.Fatalf("adjust: %v", first)
	}
	if again := h.ok("POST", "/admin/v1/adjust", h.admin, adj); again["repeat"] != true {
		t.Fatalf("repeat adjust: %v", again)
	}
	if b := h.balance(7, usdt); b.Avail != 100_000_000000 {
		t.Fatalf("a repeated adjust applied twice: %+v", b)
	}
	h.fails("POST", "/admin/v1/adjust", h.admin, `{"user_id":7,"asset":"USDT","amount":"5","ref":"f7"}`, 409, "REQ_ID_CONFLICT")
	// A debit below the balance fails; its repeat reports the same first result.
	debit := `{"user_id":7,"asset":"USDT","amount":"-200000","ref":"d7"}`
	h.fails("POST", "/admin/v1/adjust", h.admin, debit, 409, "INSUFFICIENT_BALANCE")
	h.fails("POST", "/admin/v1/adjust", h.admin, debit, 409, "INSUFFICIENT_BALANCE")
	if d := h.ok("POST", "/admin/v1/adjust", h.admin, `{"user_id":7,"asset":"USDT","amount":"-0.5","ref":"d8"}`); d["amount"] != "-0.500000" {
		t.Fatalf("debit: %v", d)
	}
	if b := h.balance(7, usdt); b.Avail != 99_999_500000 {
		t.Fatalf("after debit: %+v", b)
	}

	u7 := h.token(7)
	// Halt: orders refused, health degraded; resume: healthy again.
	if r := h.ok("POST", "/admin/v1/markets/BTC-USDT/halt", h.admin, ""); r["status"] != "HALTED" {
		t.Fatalf("halt: %v", r)
	}
	h.ok("POST", "/admin/v1/markets/BTC-USDT/halt", h.admin, "{}") // idempotent
	h.fails("POST", "/api/v1/order", u7, orderBody(), 409, "MARKET_HALTED")
	if st, hl := h.do("GET", "/health", "", ""); st != 200 || hl["status"] != "degraded" {
		t.Fatalf("health while halted: %d %v", st, hl)
	}
	if r := h.ok("POST", "/admin/v1/markets/BTC-USDT/resume", h.admin, ""); r["status"] != "ACTIVE" {
		t.Fatalf("resume: %v", r)
	}
	h.fails("POST", "/admin/v1/markets/BTC-USDT/resume", h.admin, "", 409, "NOT_HALTED")
	h.fails("POST", "/admin/v1/markets/DOGE-USDT/halt", h.admin, "", 400, "INVALID_MARKET")
	h.fails("POST", "/admin/v1/markets/BTC-USDT/halt", h.admin, `{"why":"x"}`, 400, "UNKNOWN_FIELD")
	if st, hl := h.do("GET", "/health", "", ""); st != 200 || hl["status"] != "healthy" {
		t.Fatalf("health after resume: %d %v", st, hl)
	}
	o := h.ok("POST", "/api/v1/order", u7, orderBody())

	// Account status: a frozen account cannot trade but can cancel.
	if r := h.ok("POST", "/admin/v1/accounts/7/status", h.admin, `{"status":"FROZEN"}`); r["status"] != "FROZEN" {
		t.Fatalf("freeze: %v", r)
	}
	h.fails("POST", "/api/v1/order", u7, orderBody(), 409, "ACCOUNT_FROZEN")
	h.ok("DELETE", "/api/v1/order/"+itoa(int64(num(t, o["order_id"]))), u7, "")
	h.ok("POST", "/admin/v1/accounts/7/status", h.admin, `{"status":"DISABLED"}`)
	h.fails("POST", "/api/v1/order", u7, orderBody(), 409, "ACCOUNT_DISABLED")
	h.ok("POST", "/admin/v1/accounts/7/status", h.admin, `{"status":"ACTIVE"}`)
	h.ok("POST", "/api/v1/order", u7, orderBody())
	h.fails("POST", "/admin/v1/accounts/7/status", h.admin, `{"status":"frozen"}`, 400, "INVALID_STATUS")
	h.fails("POST", "/admin/v1/accounts/7/status", h.admin, `{}`, 400, "MISSING_FIELD")
	h.fails("POST", "/admin/v1/accounts/0/status", h.admin, `{"status":"FROZEN"}`, 400, "INVALID_USER")
	h.fails("POST", "/admin/v1/accounts/x7/status", h.admin, `{"status":"FROZEN"}`, 400, "INVALID_USER")
}

func TestHealthEndpoints(t *testing.T) {
	h := newHarness(t)
	h.ready.Store(false)
	if st, b := h.do("GET", "/health/live", "", ""); st != 200 || b["status"] != "live" {
		t.Fatalf("live: %d %v", st, b)
	}
	h.fails("GET", "/health/ready", "", "", 503, "SERVICE_UNAVAILABLE")
	if st, b := h.do("GET", "/health", "", ""); st != 503 || b["status"] != "unhealthy" || b["ready"] != false {
		t.Fatalf("health before ready: %d %v", st, b)
	}
	h.ready.Store(true)
	if st, b := h.do("GET", "/health/ready", "", ""); st != 200 || b["status"] != "ready" {
		t.Fatalf("ready: %d %v", st, b)
	}
	h.fund(1, "BTC", "1")
	h.ok("POST", "/api/v1/order", h.token(1), orderBody("side", "SELL"))
	st, b := h.do("GET", "/health", "", "")
	if st != 200 || b["status"] != "healthy" || b["core_halted"] != false || num(t, b["seq"]) == 0 {
		t.Fatalf("health: %d %v", st, b)
	}
	ms := list(t, b["markets"])
	if len(ms) != 2 {
		t.Fatalf("markets: %v", ms)
	}
	if m := obj(t, ms[0]); m["market"] != "BTC-USDT" || m["status"] != "ACTIVE" || num(t, m["orders"]) != 1 || m["book_loaded"] != true {
		t.Fatalf("market health: %v", m)
	}
	if hist := obj(t, b["history"]); num(t, hist["live_orders"]) != 1 {
		t.Fatalf("history stats: %v", hist)
	}
	h.be.down.Store(true)
	if st, b := h.do("GET", "/health", "", ""); st != 503 || b["status"] != "unhealthy" {
		t.Fatalf("health with the core down: %d %v", st, b)
	}
	// Liveness does not depend on the core.
	if st, _ := h.do("GET", "/health/live", "", ""); st != 200 {
		t.Fatalf("live with the core down: %d", st)
	}
}

func TestRoutingAndMetricsHook(t *testing.T) {
	obs := &recordingObserver{}
	h := newHarness(t, func(c *ServerConfig) {
		c.Observer = obs
		c.Metrics = func(ctx *fasthttpCtx) { ctx.SetContentType("text/plain"); ctx.SetBodyString("ubs_up 1\n") }
	})
	u1 := h.token(1)
	h.fails("GET", "/nope", "", "", 404, "NOT_FOUND")
	h.fails("GET", "/api/v1/nope", u1, "", 404, "NOT_FOUND")
	h.fails("GET", "/api/v1/nope", "", "", 401, "UNAUTHORIZED") // no route enumeration without a token
	h.fails("GET", "/api/v1/order", u1, "", 405, "METHOD_NOT_ALLOWED")
	h.fails("PUT", "/api/v1/order/1", u1, "", 405, "METHOD_NOT_ALLOWED")
	h.fails("GET", "/api/v1/order/", u1, "", 404, "NOT_FOUND")
	h.fails("GET", "/api/v1/depth/DOGE-USDT", u1, "", 400, "INVALID_MARKET")
	h.fails("GET", "/api/v1/depth/BTC-USDT?limit=0", u1, "", 400, "INVALID_PARAMETER")
	h.fails("GET", "/api/v1/depth/BTC-USDT?limit=1001", u1, "", 400, "INVALID_PARAMETER")
	h.fails("GET", "/api/v1/trades/BTC-USDT?limit=x", u1, "", 400, "INVALID_PARAMETER")
	h.fails("GET", "/api/v1/orders?status=closed", u1, "", 400, "INVALID_PARAMETER")
	h.fails("GET", "/api/v1/orders?market=DOGE", u1, "", 400, "INVALID_MARKET")
	if st, raw := h.raw("GET", "/metrics", "", ""); st != 200 || string(raw) != "ubs_up 1\n" {
		t.Fatalf("/metrics: %d %q", st, raw)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.routes["POST /api/v1/order"] != 0 || obs.routes["GET /api/v1/depth/{market}"] != 3 ||
		obs.routes["unmatched"] != 6 || obs.codes["INVALID_PARAMETER"] != 4 || obs.routes["GET /metrics"] != 1 {
		t.Fatalf("observer: routes %v codes %v", obs.routes, obs.codes)
	}
}

func TestNoMetricsHandler(t *testing.T) {
	h := newHarness(t)
	h.fails("GET", "/metrics", "", "", 404, "NOT_FOUND")
}

// The answers of every endpoint are valid JSON whose strings are escaped,
// even for a client id with quotes and backslashes.
func TestEscaping(t *testing.T) {
	h := newHarness(t)
	h.fund(1, "BTC", "1")
	o := h.ok("POST", "/api/v1/order", h.token(1), orderBody("side", "SELL", "client_order_id", `#"a\"b\\c<d>"`))
	if o["client_order_id"] != `a"b\c<d>` {
		t.Fatalf("client id round trip: %v", o)
	}
	if _, raw := h.raw("GET", "/api/v1/orders", h.token(1), ""); !strings.Contains(string(raw), `a\"b\\c\u003cd\u003e`) {
		t.Fatalf("escaping: %s", raw)
	}
}

// A modify that moves the price across the book trades at once; the answer
// is the order after those fills.
func TestModifyThatCrosses(t *testing.T) {
	h := newHarness(t)
	h.fund(1, "BTC", "1")
	h.fund(2, "USDT", "100000")
	h.ok("POST", "/api/v1/order", h.token(1), orderBody("side", "SELL", "price", "50000", "quantity", "0.1"))
	bid := h.ok("POST", "/api/v1/order", h.token(2), orderBody("price", "49000", "quantity", "0.3"))
	id := itoa(int64(num(t, bid["order_id"])))
	m := h.ok("PATCH", "/api/v1/order/"+id, h.token(2), `{"price":"50000"}`)
	if m["status"] != "PARTIALLY_FILLED" || m["filled_quantity"] != "0.10000000" || len(list(t, m["fills"])) != 1 ||
		obj(t, list(t, m["fills"])[0])["fee"] != "10.000000" { // the modified order takes: 0.2% of 5000
		t.Fatalf("crossing modify: %v", m)
	}
	// A quantity at or below what is filled is refused by the core.
	h.fails("PATCH", "/api/v1/order/"+id, h.token(2), `{"quantity":"0.1"}`, 400, "INVALID_QUANTITY")
}

// When History no longer has a cancelled order, the answer is built from the
// cancel's own events (price unknown: null).
func TestCancelAnswerWithoutHistory(t *testing.T) {
	h := newHarness(t)
	h.fund(1, "BTC", "1")
	h.fund(2, "USDT", "100000")
	o := h.ok("POST", "/api/v1/order", h.token(1), orderBody("side", "SELL", "quantity", "0.5"))
	h.ok("POST", "/api/v1/order", h.token(2), orderBody("quantity", "0.2"))
	h.be.mu.Lock()
	h.be.h = History{} // as after a restart without Seed
	h.be.mu.Unlock()
	c := h.ok("DELETE", "/api/v1/order/"+itoa(int64(num(t, o["order_id"]))), h.token(1), "")
	if c["status"] != "CANCELLED" || c["filled_quantity"] != "0.20000000" || c["quantity"] != "0.50000000" ||
		c["price"] != nil || c["side"] != "SELL" || c["fills_truncated"] != true {
		t.Fatalf("cancel without History: %v", c)
	}
}

type mapArchive map[core.OrderID]OrderRecord

func (a mapArchive) Order(id core.OrderID) (OrderRecord, bool, error) {
	r, ok := a[id]
	return r, ok, nil
}

func (a mapArchive) PersistedSeq() core.Seq { return 0 }
func (a mapArchive) Orders(_ HistoryQuery, dst []OrderRecord) ([]OrderRecord, error) {
	return dst, nil
}
func (a mapArchive) Trades(_ HistoryQuery, dst []UserTrade) ([]UserTrade, error) { return dst, nil }

func TestArchiveFallback(t *testing.T) {
	arch := mapArchive{77: {ID: 77, User: 5, Market: 2, Side: core.Buy, Type: core.Limit, TIF: core.GTC,
		Status: core.StatusFilled, Price: 3000_000000, Qty: 1_0000_0000, Filled: 1_0000_0000}}
	h := newHarness(t, func(c *ServerConfig) { c.Archive = arch })
	o := h.ok("GET", "/api/v1/order/77", h.token(5), "")
	if o["market"] != "ETH-USDT" || o["status"] != "FILLED" || o["price"] != "3000.000000" || o["fills_truncated"] != true {
		t.Fatalf("archived order: %v", o)
	}
	h.fails("GET", "/api/v1/order/77", h.token(6), "", 404, "ORDER_NOT_FOUND")
	h.fails("GET", "/api/v1/order/78", h.token(5), "", 404, "ORDER_NOT_FOUND")
}
