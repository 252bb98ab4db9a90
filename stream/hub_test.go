package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/stream/streamtest"
)

// The hub in-process, over a real pipeline and real sockets (run with -race).

const testSecret = "stream-test-secret-0123456789abcdef0123456789"

type fixture struct {
	t    *testing.T
	pl   *journal.Pipeline
	hub  *Hub
	addr string
	auth *gateway.Authenticator
	now  atomic.Int64 // the hub's clock (unix ns)
	r    *journal.Reply
	mu   sync.Mutex
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newFixture runs a pipeline with USD (1, scale 2), BTC (2, scale 0) and
// market 1 BTC-USD, a hub and an HTTP server for it; users 1..4 are funded.
func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	pl, err := journal.Start(journal.Config{Dir: t.TempDir(), Logger: quiet(), ReadView: true, TruncateLimit: func() core.Seq { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, pl: pl, r: journal.NewReply()}
	f.now.Store(time.Now().UnixNano())
	mcfg := core.MarketCfg{Base: 2, Quote: 1, Tick: 1, Lot: 1, MinQty: 1, MaxQty: 1000}
	reg, err := gateway.NewRegistry([]gateway.Asset{{ID: 1, Symbol: "USD", Scale: 2}, {ID: 2, Symbol: "BTC"}},
		[]gateway.MarketSpec{{ID: 1, Symbol: "BTC-USD", Cfg: mcfg}})
	if err != nil {
		t.Fatal(err)
	}
	f.do(core.Command{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 2})
	f.do(core.Command{Kind: core.KindConfigAsset, Asset: 2, BaseScale: 0})
	f.do(core.Command{Kind: core.KindConfigMarket, Market: 1, Cfg: mcfg})
	for u := core.UserID(1); u <= 4; u++ {
		for a := core.AssetID(1); a <= 2; a++ {
			k, _ := core.KeyFrom(fmt.Sprint("fund-", u, "-", a))
			f.do(core.Command{Kind: core.KindSpotDeposit, User: u, Asset: a, Amount: 1_000_000, Key: k})
		}
	}
	f.auth, err = gateway.NewAuthenticator([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Registry: reg, Auth: f.auth, WAL: pl, Logger: quiet(), Frame: 2 * time.Millisecond,
		Now: func() time.Time { return time.Unix(0, f.now.Load()) }}
	if mod != nil {
		mod(&cfg)
	}
	f.hub = New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.hub.Run(ctx) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	srv := &fasthttp.Server{Handler: f.hub.Wrap(func(c *fasthttp.RequestCtx) { c.SetStatusCode(404) })}
	wg.Go(func() { _ = srv.Serve(ln) })
	t.Cleanup(func() {
		f.hub.Close(5 * time.Second)
		_ = srv.Shutdown()
		cancel()
		_ = pl.Close()
		wg.Wait()
	})
	return f
}

func (f *fixture) do(c core.Command) core.Event {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.pl.Submit(&c, f.r); err != nil {
		f.t.Fatal(err)
	}
	if err := f.pl.Wait(f.r); err != nil {
		f.t.Fatal(err)
	}
	return f.r.Result()
}

func (f *fixture) token(u uint64, ttl time.Duration) string {
	tok, err := f.auth.Mint(u, false, ttl, time.Unix(0, f.now.Load()))
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

func (f *fixture) dial(token string) *streamtest.Client {
	f.t.Helper()
	return streamtest.Dial(f.t, f.addr, streamtest.Options{Token: token})
}

func num(t *testing.T, v any) int64 {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("not a decimal string: %v", v)
	}
	var ip, fp int64
	frac, neg := -1, false
	for i, ch := range s {
		switch {
		case ch == '-' && i == 0:
			neg = true
		case ch == '.':
			frac = 0
		case frac >= 0:
			fp = fp*10 + int64(ch-'0')
			frac++
		default:
			ip = ip*10 + int64(ch-'0')
		}
	}
	for ; frac < 2 && frac >= 0; frac++ {
		fp *= 10
	}
	v2 := ip*100 + fp
	if frac == -1 {
		v2 = ip // an integer (BTC, scale 0)
	}
	if neg {
		v2 = -v2
	}
	return v2
}

func TestHubDepthAndPrivate(t *testing.T) {
	f := newFixture(t, nil)
	pub := f.dial("")
	pub.Subscribe(map[string]any{"channel": "depth", "market": "BTC-USD"})
	pub.Subscribe(map[string]any{"channel": "trades", "market": "BTC-USD"})
	pub.Subscribe(map[string]any{"channel": "ticker", "market": "BTC-USD"})
	priv := f.dial(f.token(1, time.Hour))
	priv.Subscribe(map[string]any{"channel": "balances"})
	priv.Subscribe(map[string]any{"channel": "orders"})
	other := f.dial("")
	other.Subscribe(map[string]any{"channel": "orders", "token": f.token(4, time.Hour)})

	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 36))
			for i := 0; i < 150; i++ {
				side := core.Side(1 + rng.IntN(2))
				px := core.Price(100 + rng.IntN(20))
				if side == core.Buy {
					px -= 5
				}
				f.do(core.Command{Kind: core.KindPlaceOrder, User: core.UserID(1 + rng.IntN(3)), Market: 1, Side: side,
					Type: core.Limit, TIF: core.GTC, Price: px, Qty: core.Units(1 + rng.IntN(9))})
			}
		})
	}
	wg.Wait()
	var bids, asks []core.PriceLevel
	var seq core.Seq
	var bal core.Balance
	if err := f.pl.Read(func(p *core.Processor) error {
		bids, asks, _ = p.Depth(1, DepthLevels, nil, nil)
		bal, seq = p.BalanceOf(1, 1), p.LastSeq()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pub.CaughtUp(uint64(seq))
	priv.CaughtUp(uint64(seq))
	// The depth stream rebuilt from its snapshot and diffs.
	book := [2]map[int64]int64{{}, {}}
	var last uint64
	trades := 0
	for _, m := range pub.All() {
		switch {
		case m["channel"] == "depth" && m["type"] == "snapshot":
			last = uint64(m["seq"].(float64))
		case m["channel"] == "depth" && m["type"] == "diff":
			if uint64(m["prev_seq"].(float64)) != last {
				t.Fatalf("gap: %v after %d", m, last)
			}
			last = uint64(m["last_seq"].(float64))
		case m["channel"] == "trades" && m["type"] == nil:
			trades += len(m["trades"].([]any))
			continue
		default:
			continue
		}
		for i, k := range []string{"bids", "asks"} {
			for _, l := range m[k].([]any) {
				pq := l.([]any)
				p, q := num(t, pq[0]), num(t, pq[1])
				if q == 0 {
					delete(book[i], p)
				} else {
					book[i][p] = q
				}
			}
		}
	}
	for i, lv := range [][]core.PriceLevel{bids, asks} {
		if len(lv) != len(book[i]) {
			t.Fatalf("side %d: %d levels rebuilt, %d in the core", i, len(book[i]), len(lv))
		}
		for _, l := range lv {
			if book[i][int64(l.Price)] != int64(l.Qty) {
				t.Fatalf("side %d level %d: rebuilt %d, core %d", i, l.Price, book[i][int64(l.Price)], l.Qty)
			}
		}
	}
	if trades == 0 {
		t.Fatal("no trades streamed")
	}
	// Balances: the snapshot plus every delta equals the core's.
	var avail, frozen int64
	orders := 0
	for _, m := range priv.All() {
		switch {
		case m["channel"] == "balances" && m["type"] == "snapshot":
			for _, b := range m["balances"].([]any) {
				if b := b.(map[string]any); b["asset"] == "USD" {
					avail, frozen = num(t, b["available"]), num(t, b["frozen"])
				}
			}
		case m["channel"] == "balances" && m["type"] == nil:
			for _, e := range m["events"].([]any) {
				if e := e.(map[string]any); e["asset"] == "USD" {
					avail += num(t, e["d_available"])
					frozen += num(t, e["d_frozen"])
				}
			}
		case m["channel"] == "orders" && m["type"] == nil:
			orders++
		}
	}
	if avail != int64(bal.Avail) || frozen != int64(bal.Frozen) {
		t.Fatalf("user 1 USD: streamed %d/%d, core %d/%d", avail, frozen, bal.Avail, bal.Frozen)
	}
	if orders == 0 {
		t.Fatal("user 1 got no order messages")
	}
	if n := len(other.All()); n != 1 { // the answer only: user 4 never traded
		t.Fatalf("user 4 got %v", other.All())
	}
	// Unsubscribe stops a channel.
	if m := pub.Ask(map[string]any{"op": "unsubscribe", "channel": "depth", "market": "BTC-USD"}); m["type"] != "unsubscribed" {
		t.Fatalf("unsubscribe: %v", m)
	}
	n := len(pub.All())
	f.do(core.Command{Kind: core.KindPlaceOrder, User: 1, Market: 1, Side: core.Buy, Type: core.Limit, TIF: core.GTC, Price: 50, Qty: 1})
	pub.CaughtUp(uint64(f.pl.DurableSeq()))
	for _, m := range pub.All()[n:] {
		if m["channel"] == "depth" {
			t.Fatalf("depth after unsubscribe: %v", m)
		}
	}
}

func TestHubReplaySince(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.token(2, time.Hour)
	a := f.dial(tok)
	a.Subscribe(map[string]any{"channel": "orders"})
	place := func(n int) {
		for i := 0; i < n; i++ {
			f.do(core.Command{Kind: core.KindPlaceOrder, User: 2, Market: 1, Side: core.Buy, Type: core.Limit, TIF: core.GTC,
				Price: core.Price(10 + i%5), Qty: 1})
		}
	}
	place(20)
	a.CaughtUp(uint64(f.pl.DurableSeq()))
	seen := map[uint64]int{}
	var last uint64
	take := func(ms []map[string]any) {
		for _, m := range ms {
			if m["channel"] == "orders" && m["type"] == nil {
				s := uint64(m["seq"].(float64))
				seen[s]++
				if s <= last {
					t.Fatalf("seq %d after %d", s, last)
				}
				last = s
			}
		}
	}
	take(a.All())
	_ = a.Conn().Close()
	place(30) // missed while away
	b := f.dial("")
	b.Subscribe(map[string]any{"channel": "orders", "token": tok, "since": last})
	place(10) // live during and after the replay
	b.CaughtUp(uint64(f.pl.DurableSeq()))
	take(b.All())
	if len(seen) != 60 {
		t.Fatalf("%d order messages, want 60 (one per order)", len(seen))
	}
	for s, n := range seen {
		if n != 1 {
			t.Fatalf("seq %d delivered %d times", s, n)
		}
	}
	// since beyond the stream: nothing replayed, nothing repeated.
	c := f.dial(tok)
	c.Subscribe(map[string]any{"channel": "orders", "since": uint64(f.pl.DurableSeq()) + 100})
}

// heldWAL holds every follower asked for while hold is set until release
// is closed: a replay that has queued nothing yet, for as long as a test wants.
type heldWAL struct {
	WAL
	hold    atomic.Bool
	release chan struct{}
}

func (w *heldWAL) NewFollower(from core.Seq) (*journal.Follower, error) {
	if w.hold.Load() {
		<-w.release
	}
	return w.WAL.NewFollower(from)
}

// A pong says every message of seqs <= its seq is queued before it, for a
// subscription with since too: while its replay has queued nothing, the
// pong's seq is since, not where the live stream stands.
func TestHubPongWaitsForReplay(t *testing.T) {
	w := &heldWAL{release: make(chan struct{})}
	f := newFixture(t, func(c *Config) { w.WAL = c.WAL; c.WAL = w })
	var once sync.Once
	release := func() { once.Do(func() { close(w.release) }) }
	t.Cleanup(release) // before the fixture's: a held replay would hold up Close
	since := uint64(f.pl.DurableSeq())
	for i := 0; i < 5; i++ {
		f.do(core.Command{Kind: core.KindPlaceOrder, User: 2, Market: 1, Side: core.Buy, Type: core.Limit, TIF: core.GTC,
			Price: core.Price(10 + i), Qty: 1})
	}
	probe := f.dial("") // the live stream has gone past the orders
	probe.CaughtUp(uint64(f.pl.DurableSeq()))
	w.hold.Store(true)
	b := f.dial("")
	b.Subscribe(map[string]any{"channel": "orders", "token": f.token(2, time.Hour), "since": since})
	if m := b.Ask(map[string]any{"op": "ping"}); uint64(m["seq"].(float64)) != since {
		t.Fatalf("pong %v while the replay from %d has queued nothing", m, since+1)
	}
	release()
	b.CaughtUp(uint64(f.pl.DurableSeq()))
	orders := 0
	for _, m := range b.All() {
		if m["channel"] == "orders" && m["type"] == nil {
			orders++
		}
	}
	if orders != 5 {
		t.Fatalf("%d order messages after the pong, want 5: %v", orders, b.All())
	}
}

func TestHubLimitsSlowConsumerAndClose(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxConns, c.MaxSubs, c.Buffer = 3, 2, 8 })
	a := f.dial("")
	a.Subscribe(map[string]any{"channel": "depth", "market": "BTC-USD"})
	a.Subscribe(map[string]any{"channel": "ticker", "market": "BTC-USD"})
	if m := a.Ask(map[string]any{"op": "subscribe", "channel": "trades", "market": "BTC-USD"}); m["code"] != CodeTooManySubs {
		t.Fatalf("a third subscription: %v", m)
	}
	for _, c := range []struct {
		msg  map[string]any
		code string
	}{
		{map[string]any{"op": "subscribe", "channel": "orders"}, CodeUnauthorized},
		{map[string]any{"op": "subscribe", "channel": "depth", "market": "NOPE"}, CodeInvalidMarket},
		{map[string]any{"op": "unsubscribe", "channel": "trades", "market": "BTC-USD"}, CodeNotSubscribed},
	} {
		if m := a.Ask(c.msg); m["type"] != "error" || m["code"] != c.code {
			t.Fatalf("%v: %v", c.msg, m)
		}
	}
	// A stalled reader: its socket takes pongs it never reads until the
	// queue (8) is full: closed with 4008.
	slow, _, err := websocket.DefaultDialer.Dial("ws://"+f.addr+Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	third := f.dial("")
	for deadline := time.Now().Add(10 * time.Second); f.hub.Stats().Conns < 3; { // counted once upgraded
		if time.Now().After(deadline) {
			t.Fatalf("%d sockets counted, want 3", f.hub.Stats().Conns)
		}
		time.Sleep(time.Millisecond)
	}
	// Past MaxConns: 503 before the upgrade.
	if _, resp, err := websocket.DefaultDialer.Dial("ws://"+f.addr+Path, nil); err == nil || resp == nil || resp.StatusCode != 503 {
		t.Fatalf("a fourth connection: %v %v", err, resp)
	}
	ping := []byte(`{"op":"ping","id":1}` + string(make([]byte, 0)))
	for i := 0; i < 200_000 && f.hub.Stats().Slow == 0; i++ {
		_ = slow.SetWriteDeadline(time.Now().Add(time.Second))
		if slow.WriteMessage(websocket.TextMessage, ping) != nil {
			break
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for f.hub.Stats().Slow == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stalled reader was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The stalled socket is closed, not only counted as slow: it leaves
	// the count (fasthttp's hijacked connection ignores Close: the
	// socket under it must be closed).
	for deadline := time.Now().Add(5 * time.Second); f.hub.Stats().Conns != 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d sockets counted after the slow one was closed, want 2", f.hub.Stats().Conns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The others go on; Close sends them 1001, within its budget.
	third.Subscribe(map[string]any{"channel": "trades", "market": "BTC-USD"})
	t0 := time.Now()
	f.hub.Close(5 * time.Second)
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("Close took %v: a socket was left open", d)
	}
	for _, c := range []*streamtest.Client{a, third} {
		if code := c.CloseCode(10 * time.Second); code != CloseGoingAway {
			t.Fatalf("closed with %d, want 1001", code)
		}
	}
}

func TestHubTokenExpiry(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(f.token(3, 10*time.Second))
	c.Subscribe(map[string]any{"channel": "orders"})
	c.Subscribe(map[string]any{"channel": "depth", "market": "BTC-USD"})
	f.now.Add(int64(11 * time.Second))
	deadline := time.Now().Add(10 * time.Second)
	for {
		closed := false
		for _, m := range c.All() {
			if m["type"] == "closed" && m["channel"] == "orders" && m["code"] == CodeTokenExpired {
				closed = true
			}
		}
		if closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orders not closed after the token expired: %v", c.All())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The public channel stays; a private one needs a fresh token.
	if m := c.Ask(map[string]any{"op": "subscribe", "channel": "balances"}); m["code"] != CodeUnauthorized {
		t.Fatalf("a private channel after expiry: %v", m)
	}
	c.Subscribe(map[string]any{"channel": "balances", "token": f.token(3, time.Hour)})

	// A token expired beyond the leeway: TOKEN_EXPIRED, on a subscribe and
	// on connect (a client fetches a new token); a malformed one is
	// UNAUTHORIZED with the reason.
	old, err := f.auth.Mint(4, false, time.Minute, time.Unix(0, f.now.Load()).Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	d := f.dial("")
	if m := d.Ask(map[string]any{"op": "subscribe", "channel": "orders", "token": old}); m["code"] != CodeTokenExpired {
		t.Fatalf("subscribe with an expired token: %v", m)
	}
	if m := d.Ask(map[string]any{"op": "subscribe", "channel": "orders", "token": "x.y.z"}); m["code"] != CodeUnauthorized ||
		m["message"] != "malformed token" {
		t.Fatalf("subscribe with a malformed token: %v", m)
	}
	for _, tok := range []struct{ tok, code string }{{old, CodeTokenExpired}, {"x.y.z", CodeUnauthorized}} {
		_, resp, err := websocket.DefaultDialer.Dial("ws://"+f.addr+Path+"?token="+tok.tok, nil)
		if err == nil || resp == nil || resp.StatusCode != 401 {
			t.Fatalf("connect with token %q: %v %v", tok.tok, err, resp)
		}
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body["code"] != tok.code {
			t.Fatalf("connect with token %q: %v %v, want %s", tok.tok, body, err, tok.code)
		}
	}
}

// failWrites is a listener whose connections fail their first write:
// the 101 of an upgrade is never written, and fasthttp calls no upgrade
// callback.
type failWrites struct{ net.Listener }

func (l failWrites) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &failFirstWrite{Conn: c}, nil
}

type discard struct{}

func (discard) Printf(string, ...any) {}

type failFirstWrite struct {
	net.Conn
	wrote atomic.Bool
}

func (c *failFirstWrite) Write(b []byte) (int, error) {
	if !c.wrote.Swap(true) {
		_ = c.Conn.Close()
		return 0, errors.New("write failed (test)")
	}
	return c.Conn.Write(b)
}

// An upgrade whose 101 cannot be written leaves no socket counted: the
// hub counts a socket in the upgrade's callback, which fasthttp skips then
// (a socket counted before it stayed counted for good, and Close waited
// for it).
func TestHubCountsOnlyUpgradedSockets(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxConns = 3 })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: f.hub.Wrap(func(c *fasthttp.RequestCtx) { c.SetStatusCode(404) }), Logger: discard{}}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(failWrites{ln}) }()
	defer func() { _ = srv.Shutdown(); <-done }()
	for i := 0; i < 5; i++ { // more than MaxConns
		if c, _, err := websocket.DefaultDialer.Dial("ws://"+ln.Addr().String()+Path, nil); err == nil {
			c.Close()
			t.Fatal("an upgrade whose 101 failed answered")
		}
	}
	if st := f.hub.Stats(); st.Conns != 0 {
		t.Fatalf("%d sockets counted after upgrades that never happened", st.Conns)
	}
	// The limit still lets MaxConns real sockets in.
	for i := 0; i < 3; i++ {
		f.dial("").Subscribe(map[string]any{"channel": "depth", "market": "BTC-USD"})
	}
	if st := f.hub.Stats(); st.Conns != 3 {
		t.Fatalf("%d sockets counted, want 3", st.Conns)
	}
}

// A client's close frame is answered with a close frame (RFC 6455
// §5.5.1), not an abnormal end.
func TestHubAnswersAClientsClose(t *testing.T) {
	f := newFixture(t, nil)
	for i := 0; i < 10; i++ {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+f.addr+Path, nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _, err = c.ReadMessage()
		c.Close()
		if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			t.Fatalf("close %d: %v, want the close frame answered", i, err)
		}
	}
}

// A Close between a socket's count and its run: the writer finishes the
// socket (no nil connection), run returns, Close returns.
func TestHubCloseRacesAnUpgrade(t *testing.T) {
	f := newFixture(t, nil)
	counted, closed := make(chan struct{}), make(chan struct{})
	testCounted = func() { close(counted); <-closed }
	t.Cleanup(func() { testCounted = nil })
	dialed := make(chan error, 1)
	go func() {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+f.addr+Path, nil)
		if err == nil {
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _, err = c.ReadMessage() // the 1001, or the end
		}
		dialed <- err
	}()
	select {
	case <-counted:
	case <-time.After(10 * time.Second):
		t.Fatal("the upgrade never counted its socket")
	}
	done := make(chan struct{})
	go func() { f.hub.Close(5 * time.Second); close(done) }()
	time.Sleep(50 * time.Millisecond) // Close kills the counted socket and waits for its run
	close(closed)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := <-dialed; err == nil {
		t.Fatal("the socket stayed open after Close")
	}
}
