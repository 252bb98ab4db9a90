package bench

import (
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// quietLogger drops fasthttp's per-connection error lines: a load
// generator closing its connections at the end of a run is not news.
type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// answerBufs are the hello-world target's scratch buffers for answers.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// appendHelloAnswer appends the hello-world target's answer to o: an
// order in the exchange's response shape (docs/design.md, durability), so the baseline
// writes, and the load generator reads, as many bytes as against the
// exchange. In the bench workload (cmd/bench's orderBody) half the
// exchange's answers are an order left resting (NEW, no fills) and half an
// order filled against one maker; the baseline answers a SELL as the
// first and a BUY as the second, with the decimals written at the default
// assets' scales (price 6, quantity 8).
func appendHelloAnswer(b []byte, o *helloOrder, id int64) []byte {
	b = append(b, `{"order_id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"client_order_id":null,"market":"`...)
	b = append(b, o.Market...)
	b = append(b, `","side":"`...)
	b = append(b, o.Side...)
	b = append(b, `","type":"`...)
	b = append(b, o.Type...)
	b = append(b, `","time_in_force":"`...)
	b = append(b, o.TimeInForce...)
	b = append(b, `","price":"`...)
	b = appendScaled(b, o.Price, 6)
	b = append(b, `","quantity":"`...)
	b = appendScaled(b, o.Quantity, 8)
	b = append(b, `","filled_quantity":"`...)
	if o.Side != "BUY" {
		b = appendScaled(b, "0", 8)
		return append(b, `","status":"NEW","time":1795575839797,"fills":[]}`...)
	}
	b = appendScaled(b, o.Quantity, 8)
	b = append(b, `","status":"FILLED","time":1795575839797,"fills":[{"trade_id":`...)
	b = strconv.AppendInt(b, id/2, 10)
	b = append(b, `,"price":"`...)
	b = appendScaled(b, o.Price, 6)
	b = append(b, `","quantity":"`...)
	b = appendScaled(b, o.Quantity, 8)
	b = append(b, `","fee":"0.099998","fee_asset":"USDT","maker_order_id":`...)
	b = strconv.AppendInt(b, id-1, 10)
	b = append(b, `,"taker_order_id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"time":1795575839797}]}`...)
	return b
}

// appendScaled appends the decimal string s with exactly scale decimals
// (zeros added; s is echoed, not validated: the baseline does no decimal
// arithmetic).
func appendScaled(b []byte, s string, scale int) []byte {
	b = append(b, s...)
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		b, dot = append(b, '.'), len(s)
	}
	for n := len(s) - dot - 1; n < scale; n++ {
		b = append(b, '0')
	}
	return b
}

// StartHelloServer serves the baseline of the HTTP benchmark on a free
// 127.0.0.1 port: a fasthttp POST handler that strictly decodes the order
// JSON and answers an order of the exchange's shape and size
// (appendHelloAnswer), with no core behind it. It returns
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
	var orderIDs atomic.Int64
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if opts.Stall > 0 {
			if phase := time.Since(epoch) % opts.StallEvery; phase < opts.Stall {
				time.Sleep(opts.Stall - phase)
			}
		}
		if ctx.IsGet() { // the baseline of GET /balance-service/users/{userId}/balance (bench p2p)
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"userId":"user1","balance":999999999.99,"available":999999999.99,"held":0.00}`)
			return
		}
		var o helloOrder
		if err := json.Unmarshal(ctx.PostBody(), &o); err != nil {
			ctx.SetStatusCode(400)
			ctx.SetBodyString(`{"code":"INVALID_JSON","message":"bad body"}`)
			return
		}
		ctx.SetContentType("application/json")
		bp := answerBufs.Get().(*[]byte)
		*bp = appendHelloAnswer((*bp)[:0], &o, orderIDs.Add(1))
		ctx.SetBody(*bp) // copies
		answerBufs.Put(bp)
	}, Name: "hello", Logger: quietLogger{}}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), srv.Shutdown, nil
}
