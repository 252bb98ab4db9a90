package gateway

// The test harness: a Backend over a real core.Processor (commands applied
// synchronously under a mutex, History fed exactly as the read view feeds
// it), the default registry of cmd/exchange, and helpers that drive the
// handler with a fasthttp.RequestCtx and decode the JSON answer.

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway/openapitest"
)

// fakeBackend is Backend over a core.Processor.
type fakeBackend struct {
	mu      sync.Mutex
	p       *core.Processor
	h       History
	clock   int64       // command time, unix ns, advanced 1 ms per command
	busy    atomic.Bool // Submit answers ErrBusy
	down    atomic.Bool // Submit and Read answer ErrUnavailable
	submits atomic.Int64
	brk     *BreakerLog                             // fed like the read view feeds it, when set
	tap     func(c *core.Command, evs []core.Event) // sees every applied command (under mu), e.g. an archive
}

func newFakeBackend(t testing.TB, reg *Registry) *fakeBackend {
	return newFakeBackendCfg(t, reg, core.Config{})
}

func newFakeBackendCfg(t testing.TB, reg *Registry, cfg core.Config) *fakeBackend {
	t.Helper()
	b := &fakeBackend{p: core.New(cfg), clock: testNow.UnixNano()}
	for _, c := range reg.ConfigCommands() {
		evs, err := b.Submit(&c, nil)
		if err != nil || evs[len(evs)-1].Code != core.OK {
			t.Fatalf("config %v: %v %v", c.Kind, err, evs)
		}
	}
	return b
}

func (b *fakeBackend) Submit(c *core.Command, dst []core.Event) ([]core.Event, error) {
	if b.down.Load() {
		return nil, ErrUnavailable
	}
	if b.busy.Load() {
		return nil, ErrBusy
	}
	b.submits.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	cc := *c
	cc.Seq = b.p.LastSeq() + 1
	b.clock += int64(time.Millisecond)
	cc.Time = b.clock
	evs := b.p.Apply(&cc)
	b.h.Apply(&cc, evs)
	if b.brk != nil {
		b.brk.Apply(&cc, evs)
	}
	if b.tap != nil {
		b.tap(&cc, evs)
	}
	return append(dst[:0], evs...), nil
}

func (b *fakeBackend) SubmitResult(c *core.Command) (core.Event, error) {
	evs, err := b.Submit(c, nil)
	if err != nil {
		return core.Event{}, err
	}
	return evs[len(evs)-1], nil
}

func (b *fakeBackend) Read(fn func(p *core.Processor, h *History) error) error {
	if b.down.Load() {
		return ErrUnavailable
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return fn(b.p, &b.h)
}

// stateHash is the core's state hash (includes the last seq: a command that
// reached the core, even rejected, changes it).
func (b *fakeBackend) stateHash() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.p.StateHash()
}

// defaultRegistry mirrors cmd/exchange's built-in config.
func defaultRegistry(t testing.TB) *Registry {
	t.Helper()
	r, err := NewRegistry([]Asset{{1, "USDT", 6}, {2, "BTC", 8}, {3, "ETH", 8}}, []MarketSpec{
		{1, "BTC-USDT", core.MarketCfg{Base: 2, Quote: 1, BaseScale: 8, Tick: 10_000, Lot: 10_000,
			MinQty: 10_000, MaxQty: 1_000 * 100_000_000, MakerFee: 1_000, TakerFee: 2_000}},
		{2, "ETH-USDT", core.MarketCfg{Base: 3, Quote: 1, BaseScale: 8, Tick: 10_000, Lot: 10_000,
			MinQty: 10_000, MaxQty: 10_000 * 100_000_000, MakerFee: 1_000, TakerFee: 2_000}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// harness is a server over a fake backend.
type harness struct {
	t     testing.TB
	be    *fakeBackend
	reg   *Registry
	auth  *Authenticator
	srv   *Server
	h     fasthttp.RequestHandler
	ready atomic.Bool
	clock atomic.Int64 // the server's clock for token expiry, unix ns (starts at testNow)
	admin string       // token of admin user 1000
}

func newHarness(t testing.TB, mod ...func(*ServerConfig)) *harness {
	t.Helper()
	reg := defaultRegistry(t)
	h := &harness{t: t, reg: reg, be: newFakeBackend(t, reg), auth: newTestAuth(t)}
	h.ready.Store(true)
	h.clock.Store(testNow.UnixNano())
	cfg := ServerConfig{Backend: h.be, Auth: h.auth, Registry: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ready:  h.ready.Load, Now: func() time.Time { return time.Unix(0, h.clock.Load()) }}
	for _, m := range mod {
		m(&cfg)
	}
	h.srv = NewServer(cfg)
	h.h = h.srv.Handler()
	h.admin = mustMint(t, h.auth, 1000, true)
	return h
}

func (h *harness) token(user uint64) string { return mustMint(h.t, h.auth, user, false) }

// raw sends one request and returns the status and body. A token starting
// with '!' is sent as the whole Authorization value.
func (h *harness) raw(method, path, token, body string) (int, []byte) {
	h.t.Helper()
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	switch {
	case strings.HasPrefix(token, "!"):
		req.Header.Set("Authorization", token[1:])
	case token != "":
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.SetBodyString(body)
		req.Header.SetContentType("application/json")
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	h.h(&ctx)
	st, out := ctx.Response.StatusCode(), append([]byte(nil), ctx.Response.Body()...)
	hdr := http.Header{}
	ctx.Response.Header.VisitAll(func(k, v []byte) { hdr.Add(string(k), string(v)) })
	if err := openapitest.Check(method, path, st, hdr, out); err != nil {
		h.t.Errorf("%v", err)
	}
	return st, out
}

// do sends a request and decodes the JSON object answered (every answer of
// the API is one).
func (h *harness) do(method, path, token, body string) (int, map[string]any) {
	h.t.Helper()
	st, raw := h.raw(method, path, token, body)
	var out map[string]any
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	if err := d.Decode(&out); err != nil {
		h.t.Fatalf("%s %s: answer is not a JSON object: %v: %q", method, path, err, raw)
	}
	if !json.Valid(raw) {
		h.t.Fatalf("%s %s: invalid JSON %q", method, path, raw)
	}
	return st, out
}

// ok requires a 200 and returns the body.
func (h *harness) ok(method, path, token, body string) map[string]any {
	h.t.Helper()
	st, out := h.do(method, path, token, body)
	if st != 200 {
		h.t.Fatalf("%s %s %s: %d %v", method, path, body, st, out)
	}
	return out
}

// fails requires an error answer with status and code, and a message.
func (h *harness) fails(method, path, token, body string, status int, code string) {
	h.t.Helper()
	st, out := h.do(method, path, token, body)
	if st != status || out["code"] != code {
		h.t.Fatalf("%s %s %.80s: got %d %v, want %d %s", method, path, body, st, out, status, code)
	}
	n := 2
	if code == CodeOrderNotOpen { // the one error that carries the order
		n = 3
		if _, ok := out["order"].(map[string]any); !ok {
			h.t.Fatalf("%s %s: ORDER_NOT_OPEN without the order: %v", method, path, out)
		}
	}
	if code == "INVARIANT_VIOLATION" { // a refused breaker resolve names its failing check and what cancel_all did
		if c, ok := out["check"].(string); ok && c != "" {
			n++
		}
		if _, ok := out["cancelled_orders"].(json.Number); ok {
			n++
		}
	}
	if msg, _ := out["message"].(string); msg == "" || len(out) != n {
		h.t.Fatalf("%s %s: error body must be exactly {code, message}: %v", method, path, out)
	}
}

// fund credits user with amount (a decimal string) of asset via the admin API.
func (h *harness) fund(user uint64, asset, amount string) {
	h.t.Helper()
	h.ok("POST", "/admin/v1/adjust", h.admin, `{"user_id":`+itoa(int64(user))+`,"asset":"`+asset+
		`","amount":"`+amount+`","ref":"fund-`+itoa(int64(user))+`-`+asset+`-`+amount+`"}`)
}

// balance returns user's (available, frozen) of asset in Units, read from the core.
func (h *harness) balance(user uint64, asset core.AssetID) core.Balance {
	h.be.mu.Lock()
	defer h.be.mu.Unlock()
	return h.be.p.BalanceOf(core.UserID(user), asset)
}

// units reads a decimal string field at scale (signed, zero allowed) and
// requires the canonical form FormatUnits writes.
func units(t testing.TB, v any, scale uint8) int64 {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("decimal %v (%T) is not a string", v, v)
	}
	var n int64
	if mag := strings.TrimPrefix(s, "-"); mag != FormatUnits(0, scale) {
		var err error
		if n, err = ParseUnits(mag, scale); err != nil {
			t.Fatalf("decimal %q: %v", s, err)
		}
		if mag != s {
			n = -n
		}
	}
	if FormatUnits(n, scale) != s {
		t.Fatalf("decimal %q is not canonical at scale %d", s, scale)
	}
	return n
}

// num reads an integer field.
func num(t testing.TB, v any) uint64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	i, err := n.Int64()
	if err != nil || i < 0 {
		t.Fatalf("%v is not a non-negative integer", v)
	}
	return uint64(i)
}

func list(t testing.TB, v any) []any {
	t.Helper()
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("%v (%T) is not a list", v, v)
	}
	return l
}

func obj(t testing.TB, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v (%T) is not an object", v, v)
	}
	return m
}

// orderBody builds a POST /order body from key/value pairs over a default
// LIMIT GTC BUY of 0.1 BTC at 50000; a nil value removes the key, a value
// starting with '#' is written raw (not quoted).
func orderBody(kv ...any) string {
	keys := []string{"market", "side", "type", "time_in_force", "price", "quantity"}
	m := map[string]string{"market": "BTC-USDT", "side": "BUY", "type": "LIMIT", "time_in_force": "GTC",
		"price": "50000", "quantity": "0.1"}
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
		if kv[i+1] == nil {
			delete(m, k)
			continue
		}
		m[k] = kv[i+1].(string)
	}
	var b strings.Builder
	b.WriteByte('{')
	n := 0
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.WriteString(`"` + k + `":`)
		if strings.HasPrefix(v, "#") {
			b.WriteString(v[1:])
		} else {
			b.WriteString(`"` + v + `"`)
		}
	}
	b.WriteByte('}')
	return b.String()
}

type fasthttpCtx = fasthttp.RequestCtx

// recordingObserver counts what the server reports.
type recordingObserver struct {
	mu     sync.Mutex
	routes map[string]int
	codes  map[string]int
}

func (o *recordingObserver) Observe(route string, status int, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.routes == nil {
		o.routes = map[string]int{}
	}
	o.routes[route]++
}

func (o *recordingObserver) Rejected(code string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.codes == nil {
		o.codes = map[string]int{}
	}
	o.codes[code]++
}
