package bench

import (
	"encoding/json"
	"errors"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// helloOrder mirrors the order request the exchange parses, so the
// baseline does the same JSON work.
type helloOrder struct {
	Market        string `json:"market"`
	Side          string `json:"side"`
	Type          string `json:"type"`
	TimeInForce   string `json:"time_in_force"`
	Price         string `json:"price"`
	Quantity      string `json:"quantity"`
	QuoteQuantity string `json:"quote_quantity"`
	ClientOrderID string `json:"client_order_id"`
}

// StartHelloServer serves the baseline of the HTTP benchmark on a free
// 127.0.0.1 port: a fasthttp POST handler that strictly decodes the order
// JSON and answers a small JSON object, with no core behind it. It returns
// the address and a stop function.
func StartHelloServer() (string, func() error, error) {
	return StartHelloServerWith(HelloOptions{})
}

// HelloOptions change the hello-world target for checks of the load
// generator itself.
type HelloOptions struct {
	// Stall, if > 0, makes the target answer nothing for Stall at the
	// start of every StallEvery period (a request arriving inside the
	// window is answered when it ends): a known, periodic server pause
	// whose latency tail a load generator must report.
	Stall, StallEvery time.Duration
}

// StartHelloServerWith is StartHelloServer with options.
func StartHelloServerWith(opts HelloOptions) (string, func() error, error) {
	if opts.Stall > 0 && opts.StallEvery <= opts.Stall {
		return "", nil, errors.New("bench: hello stall needs StallEvery > Stall")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	epoch := time.Now()
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if opts.Stall > 0 {
			if phase := time.Since(epoch) % opts.StallEvery; phase < opts.Stall {
				time.Sleep(opts.Stall - phase)
			}
		}
		var o helloOrder
		if err := json.Unmarshal(ctx.PostBody(), &o); err != nil {
			ctx.SetStatusCode(400)
			ctx.SetBodyString(`{"code":"INVALID_JSON","message":"bad body"}`)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"order_id":1,"market":"` + o.Market + `","status":"NEW"}`)
	}, Name: "hello"}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), srv.Shutdown, nil
}
