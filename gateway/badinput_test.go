package gateway

// These tests prove that every bad input gets its stable code and changes
// nothing: an edge (layer-1) rejection never reaches the core (same state
// hash, no Submit), and a core rejection leaves balances and the book as
// they were. They also prove the availability answers: 503 SYSTEM_BUSY on a
// full ring, 503 SERVICE_UNAVAILABLE once the core stopped, and 413 for a
// body over the limit, both in the handler and in the fasthttp server.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/ubscore/ubscore/core"
)

type badCase struct {
	name, method, path, body string
	status                   int
	code                     string
}

func edgeCases() []badCase {
	o := func(name string, status int, code string, kv ...any) badCase {
		return badCase{name, "POST", "/api/v1/order", orderBody(kv...), status, code}
	}
	raw := func(name, body string, code string) badCase {
		return badCase{name, "POST", "/api/v1/order", body, 400, code}
	}
	adj := func(name, body string, code string) badCase {
		return badCase{name, "POST", "/admin/v1/adjust", body, 400, code}
	}
	patch := func(name, body string, status int, code string) badCase {
		return badCase{name, "PATCH", "/api/v1/order/{live}", body, status, code}
	}
	return []badCase{
		// Amounts.
		o("quantity too many decimals", 400, "PRECISION_OVERFLOW", "quantity", "0.123456789"),
		o("price too many decimals", 400, "PRECISION_OVERFLOW", "price", "50000.0000001"),
		o("quantity beyond int64", 400, "OVERFLOW", "quantity", "99999999999999999999"),
		o("price beyond int64", 400, "OVERFLOW", "price", "9223372036855"),
		o("zero quantity", 400, "INVALID_AMOUNT", "quantity", "0"),
		o("zero price", 400, "INVALID_AMOUNT", "price", "0.00"),
		o("negative quantity", 400, "INVALID_AMOUNT", "quantity", "-1"),
		o("negative price", 400, "INVALID_AMOUNT", "price", "-50000"),
		o("exponent", 400, "INVALID_AMOUNT", "quantity", "1e-1"),
		o("empty amount", 400, "INVALID_AMOUNT", "quantity", ""),
		o("spaces", 400, "INVALID_AMOUNT", "quantity", " 0.1"),
		o("leading zero", 400, "INVALID_AMOUNT", "price", "050000"),
		o("price off the tick", 400, "INVALID_PRICE", "price", "50000.001"),
		o("quantity off the lot", 400, "INVALID_QUANTITY", "quantity", "0.00001"),
		o("quantity above max", 400, "QUANTITY_TOO_LARGE", "quantity", "1000.0001"),
		o("quote_quantity too many decimals", 400, "PRECISION_OVERFLOW", "type", "MARKET", "time_in_force", nil, "price", nil, "quantity", nil, "quote_quantity", "1.0000001"),
		o("quote_quantity zero", 400, "INVALID_AMOUNT", "type", "MARKET", "time_in_force", nil, "price", nil, "quantity", nil, "quote_quantity", "0"),
		// Market, enums, combinations.
		o("unknown market", 400, "INVALID_MARKET", "market", "DOGE-USDT"),
		o("market in lower case", 400, "INVALID_MARKET", "market", "btc-usdt"),
		o("no market", 400, "MISSING_FIELD", "market", nil),
		o("bad side", 400, "INVALID_SIDE", "side", "UP"),
		o("lower-case side", 400, "INVALID_SIDE", "side", "buy"),
		o("no side", 400, "MISSING_FIELD", "side", nil),
		o("bad type", 400, "INVALID_ORDER_TYPE", "type", "STOP"),
		o("no type", 400, "MISSING_FIELD", "type", nil),
		o("bad time_in_force", 400, "INVALID_TIME_IN_FORCE", "time_in_force", "GTD"),
		o("MARKET GTC", 400, "INVALID_TIME_IN_FORCE", "type", "MARKET", "price", nil),
		o("MARKET with a price", 400, "INVALID_PRICE", "type", "MARKET", "time_in_force", nil),
		o("LIMIT without price", 400, "MISSING_FIELD", "price", nil),
		o("LIMIT with quote_quantity", 400, "INVALID_QUANTITY", "quote_quantity", "100"),
		o("no quantity", 400, "MISSING_FIELD", "quantity", nil),
		o("quantity and quote_quantity", 400, "INVALID_QUANTITY", "type", "MARKET", "time_in_force", nil, "price", nil, "quote_quantity", "100"),
		o("MARKET SELL by quote", 400, "INVALID_QUANTITY", "side", "SELL", "type", "MARKET", "time_in_force", nil, "price", nil, "quantity", nil, "quote_quantity", "100"),
		o("empty client_order_id", 400, "INVALID_KEY", "client_order_id", ""),
		o("long client_order_id", 400, "INVALID_KEY", "client_order_id", strings.Repeat("c", 33)),
		o("control char in client_order_id", 400, "INVALID_KEY", "client_order_id", `a\u0001`),
		o("NUL in client_order_id", 400, "INVALID_KEY", "client_order_id", `a\u0000`),
		o("non-ASCII client_order_id", 400, "INVALID_KEY", "client_order_id", "é"),
		// JSON shape.
		o("unknown field", 400, "UNKNOWN_FIELD", "leverage", "100"),
		o("price as a number", 400, "INVALID_FIELD_TYPE", "price", "#50000"),
		o("quantity null", 400, "INVALID_FIELD_TYPE", "quantity", "#null"),
		o("side true", 400, "INVALID_FIELD_TYPE", "side", "#true"),
		o("market object", 400, "INVALID_FIELD_TYPE", "market", `#{"a":1}`),
		o("market array", 400, "INVALID_FIELD_TYPE", "market", `#["BTC-USDT"]`),
		raw("duplicate key", `{"market":"BTC-USDT","side":"BUY","side":"SELL","type":"LIMIT","price":"1","quantity":"1"}`, "DUPLICATE_FIELD"),
		raw("duplicate key by escape", `{"market":"BTC-USDT","side":"BUY","sid\u0065":"SELL"}`, "DUPLICATE_FIELD"),
		raw("malformed", `{"market":`, "INVALID_JSON"),
		raw("empty body", ``, "INVALID_JSON"),
		raw("whitespace body", " \n", "INVALID_JSON"),
		raw("array", `[]`, "INVALID_JSON"),
		raw("two objects", `{}{}`, "INVALID_JSON"),
		raw("trailing comma", `{"market":"BTC-USDT",}`, "INVALID_JSON"),
		raw("single quotes", `{'market':'BTC-USDT'}`, "INVALID_JSON"),
		raw("bad UTF-8", "{\"market\":\"BTC\xff\"}", "INVALID_JSON"),
		raw("raw control char", "{\"market\":\"BTC\n\"}", "INVALID_JSON"),
		raw("bad escape", `{"market":"\x"}`, "INVALID_JSON"),
		raw("number garbage", `{"market":"BTC-USDT","price":01}`, "INVALID_FIELD_TYPE"),
		raw("empty object", `{}`, "MISSING_FIELD"),
		// Modify.
		patch("modify nothing", `{}`, 400, "NOTHING_TO_MODIFY"),
		patch("modify off the tick", `{"price":"50000.001"}`, 400, "INVALID_PRICE"),
		patch("modify zero quantity", `{"quantity":"0"}`, 400, "INVALID_AMOUNT"),
		patch("modify off the lot", `{"quantity":"0.00001"}`, 400, "INVALID_QUANTITY"),
		patch("modify unknown field", `{"side":"SELL"}`, 400, "UNKNOWN_FIELD"),
		patch("modify numeric price", `{"price":50000}`, 400, "INVALID_FIELD_TYPE"),
		patch("modify finished order", `{"price":"50000"}`, 409, "ORDER_NOT_OPEN"),
		// Adjust.
		adj("adjust zero", `{"user_id":7,"asset":"USDT","amount":"0","ref":"z"}`, "INVALID_AMOUNT"),
		adj("adjust minus zero", `{"user_id":7,"asset":"USDT","amount":"-0","ref":"z"}`, "INVALID_AMOUNT"),
		adj("adjust double minus", `{"user_id":7,"asset":"USDT","amount":"--1","ref":"z"}`, "INVALID_AMOUNT"),
		adj("adjust precision", `{"user_id":7,"asset":"USDT","amount":"1.0000001","ref":"z"}`, "PRECISION_OVERFLOW"),
		adj("adjust overflow", `{"user_id":7,"asset":"BTC","amount":"-100000000000","ref":"z"}`, "OVERFLOW"),
		adj("adjust unknown asset", `{"user_id":7,"asset":"XYZ","amount":"1","ref":"z"}`, "INVALID_ASSET"),
		adj("adjust user as string", `{"user_id":"7","asset":"USDT","amount":"1","ref":"z"}`, "INVALID_FIELD_TYPE"),
		adj("adjust negative user", `{"user_id":-7,"asset":"USDT","amount":"1","ref":"z"}`, "INVALID_USER"),
		adj("adjust fractional user", `{"user_id":7.5,"asset":"USDT","amount":"1","ref":"z"}`, "INVALID_USER"),
		adj("adjust exponent user", `{"user_id":7e0,"asset":"USDT","amount":"1","ref":"z"}`, "INVALID_USER"),
		adj("adjust huge user", `{"user_id":18446744073709551616,"asset":"USDT","amount":"1","ref":"z"}`, "INVALID_USER"),
		adj("adjust amount as number", `{"user_id":7,"asset":"USDT","amount":1,"ref":"z"}`, "INVALID_FIELD_TYPE"),
		adj("adjust no ref", `{"user_id":7,"asset":"USDT","amount":"1"}`, "MISSING_FIELD"),
		adj("adjust empty ref", `{"user_id":7,"asset":"USDT","amount":"1","ref":""}`, "INVALID_KEY"),
		adj("adjust unknown field", `{"user_id":7,"asset":"USDT","amount":"1","ref":"z","note":"x"}`, "UNKNOWN_FIELD"),
		// Size.
		{"body too large", "POST", "/api/v1/order", `{"market":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}`, 413, "BODY_TOO_LARGE"},
		{"cancel with a body", "DELETE", "/api/v1/order/{live}", `{"force":true}`, 400, "UNKNOWN_FIELD"},
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.fund(7, "USDT", "100000")
	h.fund(7, "BTC", "1")
	u7 := h.token(7)
	live := itoa(int64(num(t, h.ok("POST", "/api/v1/order", u7, orderBody("price", "40000"))["order_id"])))
	done := h.ok("POST", "/api/v1/order", u7, orderBody("price", "40000", "client_order_id", "gone"))
	h.ok("DELETE", "/api/v1/order/"+itoa(int64(num(t, done["order_id"]))), u7, "")
	for _, c := range edgeCases() {
		path := strings.ReplaceAll(c.path, "{live}", live)
		if c.name == "modify finished order" {
			path = "/api/v1/order/" + itoa(int64(num(t, done["order_id"])))
		}
		tok := u7
		if strings.HasPrefix(path, "/admin") {
			tok = h.admin
		}
		before, n := h.be.stateHash(), h.be.submits.Load()
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			h.fails(c.method, path, tok, c.body, c.status, c.code)
			if h.be.stateHash() != before || h.be.submits.Load() != n {
				t.Fatalf("%s reached the core", c.name)
			}
		})
	}
}

// Rejections decided by the core: the answer carries the core's code and
// balances and the book are unchanged (the state hash moves only by the
// rejected command's seq).
func TestCoreRejectionsChangeNothing(t *testing.T) {
	h := newHarness(t)
	h.fund(7, "USDT", "2000")
	h.fund(8, "BTC", "1")
	u7 := h.token(7)
	h.ok("POST", "/api/v1/order", h.token(8), orderBody("side", "SELL", "price", "50000", "quantity", "0.01"))
	snapshot := func() string {
		var b bytes.Buffer
		for _, u := range []uint64{0, 7, 8} {
			for a := core.AssetID(1); a <= 3; a++ {
				fmt.Fprint(&b, h.balance(u, a))
			}
		}
		depth := h.ok("GET", "/api/v1/depth/BTC-USDT", u7, "")
		delete(depth, "seq") // the rejected command's seq is consumed
		_, open := h.raw("GET", "/api/v1/orders", u7, "")
		return b.String() + fmt.Sprint(depth) + string(open)
	}
	for _, c := range []badCase{
		{"insufficient balance", "POST", "/api/v1/order", orderBody("quantity", "1"), 409, "INSUFFICIENT_BALANCE"},
		{"post-only would take", "POST", "/api/v1/order", orderBody("time_in_force", "POST_ONLY", "quantity", "0.01"), 409, "POST_ONLY_WOULD_TAKE"},
		{"fok", "POST", "/api/v1/order", orderBody("time_in_force", "FOK", "quantity", "0.02", "price", "50000"), 409, "FOK_NOT_FILLED"},
		{"no liquidity", "POST", "/api/v1/order", orderBody("market", "ETH-USDT", "type", "MARKET", "time_in_force", nil, "price", nil), 409, "NO_LIQUIDITY"},
		{"cancel unknown", "DELETE", "/api/v1/order/999999", "", 404, "ORDER_NOT_FOUND"},
		{"debit too much", "POST", "/admin/v1/adjust", `{"user_id":7,"asset":"USDT","amount":"-2000.000001","ref":"d"}`, 409, "INSUFFICIENT_BALANCE"},
		{"resume active market", "POST", "/admin/v1/markets/BTC-USDT/resume", "", 409, "NOT_HALTED"},
	} {
		tok := u7
		if strings.HasPrefix(c.path, "/admin") {
			tok = h.admin
		}
		before := snapshot()
		h.fails(c.method, c.path, tok, c.body, c.status, c.code)
		if after := snapshot(); after != before {
			t.Fatalf("%s changed the state:\n%s\n%s", c.name, before, after)
		}
	}
}

func TestBackendUnavailable(t *testing.T) {
	h := newHarness(t)
	h.fund(7, "USDT", "1000")
	u7 := h.token(7)
	h.be.busy.Store(true)
	h.fails("POST", "/api/v1/order", u7, orderBody("quantity", "0.01"), 503, "SYSTEM_BUSY")
	h.fails("DELETE", "/api/v1/order/1", u7, "", 503, "SYSTEM_BUSY")
	h.fails("POST", "/admin/v1/adjust", h.admin, `{"user_id":7,"asset":"USDT","amount":"1","ref":"b"}`, 503, "SYSTEM_BUSY")
	h.ok("GET", "/api/v1/balances", u7, "") // reads do not go through the ring
	h.be.busy.Store(false)
	h.be.down.Store(true)
	h.fails("POST", "/api/v1/order", u7, orderBody("quantity", "0.01"), 503, "SERVICE_UNAVAILABLE")
	h.fails("GET", "/api/v1/balances", u7, "", 503, "SERVICE_UNAVAILABLE")
	h.fails("GET", "/api/v1/order/1", u7, "", 503, "SERVICE_UNAVAILABLE")
	h.fails("PATCH", "/api/v1/order/1", u7, `{"price":"1"}`, 503, "SERVICE_UNAVAILABLE")
	h.be.down.Store(false)
	if b := h.balance(7, usdt); b.Avail != 1000_000000 {
		t.Fatalf("a refused request moved funds: %+v", b)
	}
}

// A panicking backend is a bug: the request gets a 500 and the server lives on.
func TestHandlerPanicIs500(t *testing.T) {
	h := newHarness(t)
	h.srv.backend = panicBackend{}
	h.fails("GET", "/api/v1/balances", h.token(1), "", 500, "INTERNAL_ERROR")
	h.fails("GET", "/api/v1/balances", h.token(1), "", 500, "INTERNAL_ERROR")
}

type panicBackend struct{}

func (panicBackend) Submit(*core.Command, []core.Event) ([]core.Event, error) { panic("boom") }
func (panicBackend) SubmitResult(*core.Command) (core.Event, error)           { panic("boom") }
func (panicBackend) Read(func(*core.Processor, *History) error) error {
	panic("boom")
}

// Through a real fasthttp server (in-memory listener): bodies over the limit
// are refused while reading, with the API's JSON error; others are served.
func TestHTTPServerLimits(t *testing.T) {
	h := newHarness(t)
	h.fund(7, "USDT", "10000")
	ln := fasthttputil.NewInmemoryListener()
	srv := h.srv.HTTPServer()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(); _ = ln.Close() })
	client := &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}
	send := func(method, path, body string, chunked ...bool) (int, map[string]any) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://exchange" + path)
		req.Header.SetMethod(method)
		req.Header.Set("Authorization", "Bearer "+h.token(7))
		if len(chunked) > 0 {
			req.SetBodyStream(strings.NewReader(body), -1)
		} else {
			req.SetBodyString(body)
		}
		if err := client.Do(req, resp); err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		if err := json.Unmarshal(resp.Body(), &out); err != nil {
			t.Fatalf("%s %s: %v %q", method, path, err, resp.Body())
		}
		if ct := string(resp.Header.ContentType()); ct != "application/json" {
			t.Fatalf("content type %q", ct)
		}
		return resp.StatusCode(), out
	}
	if st, out := send("POST", "/api/v1/order", orderBody("quantity", "0.01")); st != 200 || out["status"] != "NEW" {
		t.Fatalf("order over HTTP: %d %v", st, out)
	}
	big := `{"market":"BTC-USDT","client_order_id":"` + strings.Repeat("x", 1<<20) + `"}`
	if st, out := send("POST", "/api/v1/order", big); st != 413 || out["code"] != "BODY_TOO_LARGE" {
		t.Fatalf("1 MiB body: %d %v", st, out)
	}
	if st, out := send("GET", "/api/v1/balances", ""); st != 200 || out["balances"] == nil {
		t.Fatalf("after a refused body: %d %v", st, out)
	}
	// Chunked bodies: read up to the limit, never buffered beyond it.
	if st, out := send("POST", "/api/v1/order", orderBody("quantity", "0.01"), true); st != 200 || out["status"] != "NEW" {
		t.Fatalf("chunked order: %d %v", st, out)
	}
	if st, out := send("POST", "/api/v1/order", big, true); st != 413 || out["code"] != "BODY_TOO_LARGE" {
		t.Fatalf("chunked 1 MiB body: %d %v", st, out)
	}
	exact := orderBody("quantity", "0.01", "client_order_id", "")
	pad := DefaultMaxBodyBytes - len(exact)
	exact = exact[:len(exact)-1] + strings.Repeat(" ", pad) + "}" // whitespace up to exactly the limit
	if st, out := send("POST", "/api/v1/order", exact); st != 400 || out["code"] != "INVALID_KEY" {
		t.Fatalf("body of exactly the limit: %d %v", st, out)
	}
	if st, out := send("POST", "/api/v1/order", exact+" "); st != 413 {
		t.Fatalf("body one byte over the limit: %d %v", st, out)
	}
	// Beyond the drain limit the answer is still 413 (the connection closes).
	huge := strings.Repeat(" ", DefaultMaxBodyBytes+MaxDrainBytes+1)
	if st, out := send("POST", "/api/v1/order", huge); st != 413 || out["code"] != "BODY_TOO_LARGE" {
		t.Fatalf("huge body: %d %v", st, out)
	}
	if st, _ := send("GET", "/api/v1/balances", ""); st != 200 {
		t.Fatalf("after a huge body: %d", st)
	}
}
