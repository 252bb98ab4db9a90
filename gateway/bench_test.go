package gateway

// Benchmarks of the POST /order path, and the proof that the handler's own
// part of it allocates nothing: with a backend that allocates nothing, a
// steady-state order request costs zero allocations. A concurrency test
// drives the handler from many goroutines (pooled state, token cache) under
// the race detector.

import (
	"fmt"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// stubBackend answers every Submit with the same events, without allocating.
type stubBackend struct{ evs []core.Event }

func (b *stubBackend) Submit(_ *core.Command, dst []core.Event) ([]core.Event, error) {
	return append(dst[:0], b.evs...), nil
}
func (b *stubBackend) SubmitResult(*core.Command) (core.Event, error) {
	return b.evs[len(b.evs)-1], nil
}
func (b *stubBackend) Read(fn func(*core.Processor, *History) error) error {
	return fn(nil, nil)
}

// orderCtx is a reusable POST /order request.
func orderCtx(token, body string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/api/v1/order")
	req.Header.Set("Authorization", "Bearer "+token)
	req.SetBodyString(body)
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, nil, nil)
	return ctx
}

func TestPostOrderHandlerZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts need a build without -race")
	}
	h := newHarness(t)
	stub := &stubBackend{evs: []core.Event{
		{Kind: core.EvTrade, Market: 1, TradeID: 7, Price: 50000_000000, Qty: 10_000_000, OrderID: 3, OtherOrderID: 9, Fee2: 100},
		{Kind: core.EvOrderFilled, OrderID: 9},
		{Kind: core.EvResult, Code: core.OK, OrderID: 9, Status: core.StatusFilled, Qty: 10_000_000},
	}}
	h.srv.backend = stub
	ctx := orderCtx(h.token(1), orderBody("client_order_id", "c-1"))
	h.h(ctx) // warm the pools and the token cache
	if ctx.Response.StatusCode() != 200 {
		t.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if n := testing.AllocsPerRun(200, func() { ctx.Response.Reset(); h.h(ctx) }); n != 0 {
		t.Fatalf("POST /order handler allocates %v times per request", n)
	}
}

// BenchmarkPostOrder: the whole handler over the fake backend (a real core
// under a mutex, History fed), alternating a resting SELL and a BUY that
// fills it, so every other request trades. The fake backend's own copy of
// the events is included.
func BenchmarkPostOrder(b *testing.B) {
	for _, cache := range []int{0, -1} {
		name := "token-cache"
		if cache < 0 {
			name = "no-token-cache"
		}
		b.Run(name, func(b *testing.B) {
			h := newHarness(b, func(c *ServerConfig) { c.TokenCacheSize = cache })
			h.fund(1, "BTC", "1000000")
			h.fund(2, "USDT", "10000000000")
			sell := orderCtx(h.token(1), orderBody("side", "SELL", "quantity", "0.01"))
			buy := orderCtx(h.token(2), orderBody("quantity", "0.01"))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ctx := sell
				if i&1 == 1 {
					ctx = buy
				}
				i++
				ctx.Response.Reset()
				h.h(ctx)
				if ctx.Response.StatusCode() != 200 {
					b.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
		})
	}
}

// BenchmarkPostOrderHandlerOnly: the handler with a backend that costs
// nothing: routing, auth (cached), decoding, validation and encoding.
func BenchmarkPostOrderHandlerOnly(b *testing.B) {
	h := newHarness(b)
	h.srv.backend = &stubBackend{evs: []core.Event{{Kind: core.EvResult, Code: core.OK, OrderID: 9, Status: core.StatusNew}}}
	ctx := orderCtx(h.token(1), orderBody("client_order_id", "c-1"))
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h.h(ctx)
	}
}

func BenchmarkGetOrder(b *testing.B) {
	h := newHarness(b)
	h.fund(1, "BTC", "1")
	id := num(b, h.ok("POST", "/api/v1/order", h.token(1), orderBody("side", "SELL"))["order_id"])
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	req.SetRequestURI(fmt.Sprint("/api/v1/order/", id))
	req.Header.Set("Authorization", "Bearer "+h.token(1))
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h.h(ctx)
	}
}

// Many goroutines place and cancel orders and read; afterwards every
// user's books and balances are consistent with what they were told.
func TestConcurrentRequests(t *testing.T) {
	h := newHarness(t)
	const users, perUser = 8, 200
	for u := uint64(1); u <= users; u++ {
		h.fund(u, "BTC", "100")
		h.fund(u, "USDT", "100000000")
	}
	var wg sync.WaitGroup
	errs := make(chan string, users)
	for u := uint64(1); u <= users; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := h.token(u)
			side := []string{"BUY", "SELL"}[u%2]
			for i := range perUser {
				var req fasthttp.Request
				req.Header.SetMethod("POST")
				req.SetRequestURI("/api/v1/order")
				req.Header.Set("Authorization", "Bearer "+tok)
				req.SetBodyString(orderBody("side", side, "price", fmt.Sprint(49990+i%20), "quantity", "0.01"))
				var ctx fasthttp.RequestCtx
				ctx.Init(&req, nil, nil)
				h.h(&ctx)
				if ctx.Response.StatusCode() != 200 {
					errs <- fmt.Sprintf("user %d order %d: %d %s", u, i, ctx.Response.StatusCode(), ctx.Response.Body())
					return
				}
				req.Reset()
				req.Header.SetMethod("GET")
				req.SetRequestURI("/api/v1/balances")
				req.Header.Set("Authorization", "Bearer "+tok)
				ctx.Init(&req, nil, nil)
				h.h(&ctx)
				if ctx.Response.StatusCode() != 200 {
					errs <- fmt.Sprintf("user %d balances: %d", u, ctx.Response.StatusCode())
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	h.be.mu.Lock()
	defer h.be.mu.Unlock()
	if v := h.be.p.CheckInvariants(); len(v) != 0 {
		t.Fatalf("invariants: %+v", v)
	}
	if st := h.be.h.Stats(); st.LiveOrders+st.FinishedOrders != users*perUser {
		t.Fatalf("History saw %+v, want %d orders", st, users*perUser)
	}
}
