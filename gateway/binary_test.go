package gateway

// This file proves the binary-market HTTP API (issue 22) against a real
// core: an admin creates, activates, suspends, resumes, resolves and
// settles a market; users trade all four fill kinds through POST
// /api/v1/order with "outcome"; the market view, the two depth views, the
// positions, GET and DELETE of a binary order answer from the core; and
// after every step the USDT balances + reserve + pnl pool equal what was
// credited, to the unit.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/core"
)

func TestBinaryMarketHTTP(t *testing.T) {
	h := newHarness(t)
	u1, u2, u3 := h.token(1), h.token(2), h.token(3)
	for _, u := range []uint64{1, 2, 3} {
		h.fund(u, "USDT", "1000")
	}
	conserved := func(step string) {
		t.Helper()
		h.be.mu.Lock()
		defer h.be.mu.Unlock()
		var sum core.Units
		for _, u := range []core.UserID{0, 1, 2, 3} {
			b := h.be.p.BalanceOf(u, 1)
			sum += b.Avail + b.Frozen
		}
		if v, ok := h.be.p.Binary(7); ok {
			sum += v.Reserve + v.PnlPool
		}
		if sum != 3_000*1_000_000 {
			t.Fatalf("%s: balances + reserve + pnl pool = %d, want %d", step, sum, 3_000*1_000_000)
		}
	}
	h.fails("POST", "/admin/v1/binary-markets", u1, `{"market_id":7,"quote":"USDT","question":"Q?"}`, 403, CodeForbidden)
	h.fails("POST", "/admin/v1/binary-markets", h.admin, `{"market_id":7,"quote":"DOGE","question":"Q?"}`, 400,
		"INVALID_ASSET")
	h.fails("POST", "/admin/v1/binary-markets", h.admin,
		`{"market_id":7,"quote":"USDT","payout":"1.00005","question":"Q?"}`, 400, "INVALID_MARKET_CONFIG")
	m := h.ok("POST", "/admin/v1/binary-markets", h.admin, `{"market_id":7,"quote":"USDT","maker_fee_ppm":1000,`+
		`"taker_fee_ppm":2000,"max_quantity":100000,"question":"Will \"it\" rain in Lisbon on 1 May 2027? \u2614"}`)
	const question = `Will "it" rain in Lisbon on 1 May 2027? ☔`
	if m["status"] != "DRAFT" || m["payout"] != "1.000000" || m["tick"] != "0.010000" || m["question"] != question {
		t.Fatalf("created: %v", m)
	}
	if g := h.ok("GET", "/api/v1/binary-markets/7", u1, ""); g["question"] != question {
		t.Fatalf("GET: %v", g)
	}
	h.fails("POST", "/admin/v1/binary-markets", h.admin, `{"market_id":1,"quote":"USDT","question":"Q?"}`, 409,
		"MARKET_EXISTS")
	order := func(tok, side, out, price string, qty int) map[string]any {
		t.Helper()
		return h.ok("POST", "/api/v1/order", tok, `{"market":"7","outcome":"`+out+`","side":"`+side+`","type":"LIMIT",`+
			`"price":"`+price+`","quantity":"`+itoa(int64(qty))+`"}`)
	}
	h.fails("POST", "/api/v1/order", u1, `{"market":"7","outcome":"YES","side":"BUY","price":"0.6","quantity":"10"}`,
		409, "MARKET_NOT_OPEN")
	h.ok("POST", "/admin/v1/binary-markets/7/activate", h.admin, "")
	conserved("activate")

	// MINT: BUY YES 0.60 rests as book BUY 0.60; BUY NO 0.40 is book SELL 0.60
	o := order(u1, "BUY", "YES", "0.60", 100)
	if o["status"] != "NEW" || o["book_type"] != "NATIVE" || o["book_price"] != "0.600000" {
		t.Fatalf("BUY YES: %v", o)
	}
	o = order(u2, "BUY", "NO", "0.40", 100)
	fills, _ := o["fills"].([]any)
	if o["status"] != "FILLED" || o["book_side"] != "SELL" || len(fills) != 1 ||
		fills[0].(map[string]any)["kind"] != "MINT" || fills[0].(map[string]any)["price"] != "0.400000" {
		t.Fatalf("BUY NO: %v", o)
	}
	conserved("mint")
	// TRANSFER_YES, with price improvement: user 1 sells 30 YES @0.65, user 3 buys @0.70 and pays 0.65
	order(u1, "SELL", "YES", "0.65", 30)
	o = order(u3, "BUY", "YES", "0.70", 30)
	if f := o["fills"].([]any)[0].(map[string]any); f["kind"] != "TRANSFER_YES" || f["price"] != "0.650000" {
		t.Fatalf("transfer YES: %v", o)
	}
	if b := h.balance(3, 1); b.Frozen != 0 || b.Avail != 1_000_000_000-(30*650_000+39_000) { // taker fee 0.2% of 19.5 USDT
		t.Fatalf("user 3 after a better price: %+v", b)
	}
	conserved("transfer YES")
	// TRANSFER_NO: user 2 sells 20 NO @0.45 (book BUY 0.55); user 3 buys NO @0.45
	order(u2, "SELL", "NO", "0.45", 20)
	o = order(u3, "BUY", "NO", "0.45", 20)
	if f := o["fills"].([]any)[0].(map[string]any); f["kind"] != "TRANSFER_NO" {
		t.Fatalf("transfer NO: %v", o)
	}
	conserved("transfer NO")
	// BURN: user 1 sells 50 YES @0.50, user 2 sells 50 NO @0.50
	order(u1, "SELL", "YES", "0.50", 50)
	o = order(u2, "SELL", "NO", "0.50", 60)
	if f := o["fills"].([]any)[0].(map[string]any); f["kind"] != "BURN" || o["status"] != "PARTIALLY_FILLED" {
		t.Fatalf("burn: %v", o)
	}
	conserved("burn")
	// oversell, modify: refused
	h.fails("POST", "/api/v1/order", u3, `{"market":"7","outcome":"YES","side":"SELL","price":"0.9","quantity":"31"}`,
		409, "INSUFFICIENT_SHARES")
	rest := int64(num(t, o["order_id"]))
	h.fails("PATCH", "/api/v1/order/"+itoa(rest), u2, `{"price":"0.4"}`, 400, "NOT_SUPPORTED")

	// views: the market, both depth views, the positions, a resting order
	v := h.ok("GET", "/api/v1/binary-markets/7", u1, "")
	if v["yes_shares"] != json.Number("50") || v["reserve"] != "50.000000" || v["status"] != "ACTIVE" ||
		v["yes"].(map[string]any)["bid"] != "0.500000" || v["no"].(map[string]any)["ask"] != "0.500000" {
		t.Fatalf("market view: %v", v)
	}
	d := h.ok("GET", "/api/v1/depth/7?outcome=NO", u1, "")
	if a := d["asks"].([]any); len(a) != 1 || a[0].([]any)[0] != "0.500000" || a[0].([]any)[1] != "10" {
		t.Fatalf("NO depth: %v", d)
	}
	d = h.ok("GET", "/api/v1/depth/7?outcome=YES", u1, "")
	if b := d["bids"].([]any); len(b) != 1 || b[0].([]any)[0] != "0.500000" {
		t.Fatalf("YES depth: %v", d)
	}
	ps := h.ok("GET", "/api/v1/positions", u3, "")["positions"].([]any)
	if len(ps) != 1 || ps[0].(map[string]any)["yes_volume"] != json.Number("30") ||
		ps[0].(map[string]any)["no_volume"] != json.Number("20") {
		t.Fatalf("positions of user 3: %v", ps)
	}
	g := h.ok("GET", "/api/v1/order/"+itoa(rest), u2, "")
	if g["outcome"] != "NO" || g["side"] != "SELL" || g["book_side"] != "BUY" || g["status"] != "PARTIALLY_FILLED" {
		t.Fatalf("GET binary order: %v", g)
	}
	h.fails("GET", "/api/v1/order/"+itoa(rest), u1, "", 404, "ORDER_NOT_FOUND")
	filledID := int64(num(t, o["order_id"])) - 1 // user 1's SELL YES @0.50, filled by the burn
	if f := h.ok("GET", "/api/v1/order/"+itoa(filledID), u1, ""); f["status"] != "FILLED" || f["filled"] != json.Number("50") {
		t.Fatalf("GET a filled binary order: %v", f)
	}

	// suspend (cancels only), resume, then a cancel; resolve YES and settle in slices
	h.ok("POST", "/admin/v1/binary-markets/7/suspend", h.admin, "")
	h.fails("POST", "/api/v1/order", u1, `{"market":"7","outcome":"YES","side":"BUY","price":"0.1","quantity":"1"}`,
		409, "MARKET_SUSPENDED")
	h.ok("POST", "/admin/v1/binary-markets/7/resume", h.admin, "")
	order(u1, "BUY", "NO", "0.10", 5) // rests: resolution cancels it
	c := h.ok("DELETE", "/api/v1/order/"+itoa(rest), u2, "")
	if c["status"] != "CANCELLED" || c["outcome"] != "NO" {
		t.Fatalf("cancel: %v", c)
	}
	conserved("cancel")
	h.fails("POST", "/admin/v1/binary-markets/7/resolve", h.admin, `{"outcome":"MAYBE"}`, 400, "INVALID_OUTCOME")
	r := h.ok("POST", "/admin/v1/binary-markets/7/resolve", h.admin, `{"outcome":"YES"}`)
	if r["status"] != "RESOLVED" || r["settling"] != true || r["processed"] != json.Number("1") {
		t.Fatalf("resolve: %v", r)
	}
	conserved("resolve")
	r = h.ok("POST", "/admin/v1/binary-markets/7/settle", h.admin, `{"limit":2}`)
	if r["processed"] != json.Number("2") || r["settling"] != true {
		t.Fatalf("settle slice: %v", r)
	}
	conserved("settle slice")
	r = h.ok("POST", "/admin/v1/binary-markets/7/settle", h.admin, "")
	if r["status"] != "SETTLED" || r["reserve"] != "0.000000" || r["pnl_pool"] != "0.000000" || r["settling"] != false {
		t.Fatalf("settled: %v", r)
	}
	conserved("settled")
	h.fails("POST", "/admin/v1/binary-markets/7/settle", h.admin, "", 409, "NOTHING_TO_SETTLE")
	h.fails("POST", "/admin/v1/binary-markets/7/explode", h.admin, "", 404, CodeNotFound)
	h.fails("GET", "/api/v1/binary-markets/1", u1, "", 400, "NOT_BINARY")
	// every YES share paid 1 USDT: user 3 holds 30 YES, user 1 none left
	if b := h.balance(3, 1); b.Frozen != 0 {
		t.Fatalf("user 3: %+v", b)
	}
	if fee := h.balance(0, 1); fee.Avail == 0 {
		t.Fatal("the pnl pool did not reach the fee account")
	}
}

// TestBinaryQuestionHTTP: POST /admin/v1/binary-markets requires a question
// of 1..256 bytes of UTF-8 without control characters; each bad one is a
// 400 with a stable code and sequences nothing; a good one (multi-byte, at
// the limit) comes back from the create answer and GET.
func TestBinaryQuestionHTTP(t *testing.T) {
	h := newHarness(t)
	lastSeq := func() core.Seq {
		h.be.mu.Lock()
		defer h.be.mu.Unlock()
		return h.be.p.LastSeq()
	}
	body := func(q string) string { return `{"market_id":7,"quote":"USDT","question":` + q + `}` }
	bad := []struct {
		name, q, code string
	}{
		{"empty", `""`, "INVALID_QUESTION"},
		{"257 bytes", `"` + strings.Repeat("a", core.MaxQuestionLen+1) + `"`, "INVALID_QUESTION"},
		{"258 bytes of é", `"` + strings.Repeat("é", core.MaxQuestionLen/2+1) + `"`, "INVALID_QUESTION"},
		{"newline", `"line one\nline two"`, "INVALID_QUESTION"},
		{"tab", `"a\tb"`, "INVALID_QUESTION"},
		{"nul", `"a\u0000b"`, "INVALID_QUESTION"},
		{"del", `"a\u007fb"`, "INVALID_QUESTION"},
		{"c1", `"a\u0085b"`, "INVALID_QUESTION"},
		{"not a string", `42`, CodeInvalidFieldType},
		{"null", `null`, CodeInvalidFieldType},
		{"raw invalid utf8", "\"a\xffb\"", CodeInvalidJSON},
		{"raw control", "\"a\x01b\"", CodeInvalidJSON},
	}
	before := lastSeq()
	for _, b := range bad {
		h.fails("POST", "/admin/v1/binary-markets", h.admin, body(b.q), 400, b.code)
	}
	h.fails("POST", "/admin/v1/binary-markets", h.admin, `{"market_id":7,"quote":"USDT"}`, 400, CodeMissingField)
	if s := lastSeq(); s != before {
		t.Fatalf("bad questions were sequenced: seq %d -> %d", before, s)
	}
	h.fails("GET", "/api/v1/binary-markets/7", h.admin, "", 400, "NOT_BINARY")

	q := strings.Repeat("é", core.MaxQuestionLen/2) // 256 bytes
	if m := h.ok("POST", "/admin/v1/binary-markets", h.admin, body(`"`+q+`"`)); m["question"] != q {
		t.Fatalf("created: %v", m["question"])
	}
	if g := h.ok("GET", "/api/v1/binary-markets/7", h.admin, ""); g["question"] != q || g["status"] != "DRAFT" {
		t.Fatalf("GET: %v", g)
	}
	// a DRAFT market may be reconfigured: a bad question leaves the stored one
	h.fails("POST", "/admin/v1/binary-markets", h.admin, body(`"a\nb"`), 400, "INVALID_QUESTION")
	if g := h.ok("GET", "/api/v1/binary-markets/7", h.admin, ""); g["question"] != q {
		t.Fatalf("after a refused reconfiguration: %v", g["question"])
	}
}
