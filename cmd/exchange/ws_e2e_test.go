package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/stream"
	"github.com/ubscore/ubscore/stream/schema"
)

// wsClient is a test client of GET /ws: it reads every message on its own
// goroutine (unless stalled) and keeps them in order.
type wsClient struct {
	t      *testing.T
	c      *websocket.Conn
	mu     sync.Mutex
	msgs   []map[string]any
	err    error // how reading ended
	done   chan struct{}
	nextID uint64
}

func wsDial(t *testing.T, addr, token string, read bool) *wsClient {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	if !read { // a stalled reader: a small socket receive buffer fills fast
		d.ReadBufferSize = 1024
		nd := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			}); err != nil {
				return err
			}
			return serr
		}}
		d.NetDial = nd.Dial
	}
	c, resp, err := d.Dial("ws://"+addr+"/ws", h)
	if err != nil {
		t.Fatalf("dial /ws: %v (%v)", err, resp)
	}
	w := &wsClient{t: t, c: c, done: make(chan struct{})}
	t.Cleanup(func() { _ = c.Close() })
	if read {
		go w.read()
	}
	return w
}

func (w *wsClient) read() {
	defer close(w.done)
	for {
		_, data, err := w.c.ReadMessage()
		if err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			return
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			w.mu.Lock()
			w.err = fmt.Errorf("not JSON: %q", data)
			w.mu.Unlock()
			return
		}
		if err := schema.Check(data); err != nil { // every message as its document says
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		w.msgs = append(w.msgs, m)
		w.mu.Unlock()
	}
}

func (w *wsClient) all() []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]map[string]any(nil), w.msgs...)
}

func (w *wsClient) send(v map[string]any) uint64 {
	w.t.Helper()
	w.mu.Lock()
	w.nextID++
	id := w.nextID
	w.mu.Unlock()
	v["id"] = id
	if err := w.c.WriteJSON(v); err != nil {
		w.t.Fatalf("ws write: %v", err)
	}
	return id
}

// waitFor waits until a message satisfies ok and returns it.
func (w *wsClient) waitFor(what string, within time.Duration, ok func(map[string]any) bool) map[string]any {
	w.t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, m := range w.all() {
			if ok(m) {
				return m
			}
		}
		w.mu.Lock()
		err := w.err
		w.mu.Unlock()
		if err != nil {
			w.t.Fatalf("%s: connection ended: %v", what, err)
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: not within %v; last messages: %v", what, within, tail(w.all(), 5))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func tail(ms []map[string]any, n int) []map[string]any { return ms[max(0, len(ms)-n):] }

func idIs(id uint64) func(map[string]any) bool {
	return func(m map[string]any) bool { v, ok := m["id"].(float64); return ok && uint64(v) == id }
}

// subscribe sends a subscribe and waits for its answer ("subscribed").
func (w *wsClient) subscribe(v map[string]any) {
	w.t.Helper()
	v["op"] = "subscribe"
	id := w.send(v)
	if m := w.waitFor(fmt.Sprint("subscribe ", v), 20*time.Second, idIs(id)); m["type"] != "subscribed" {
		w.t.Fatalf("subscribe %v: %v", v, m)
	}
}

// caughtUp waits until the stream has handed out every seq <= seq (a pong says so).
func (w *wsClient) caughtUp(seq uint64) {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		id := w.send(map[string]any{"op": "ping"})
		m := w.waitFor("pong", 20*time.Second, idIs(id))
		if uint64(m["seq"].(float64)) >= seq {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("stream not caught up with seq %d: %v", seq, m)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// book is a depth stream rebuilt from its snapshot and diffs.
type book struct {
	bids, asks map[int64]int64
	seq        uint64
}

func rebuildBook(t *testing.T, msgs []map[string]any, market, outcome string, pScale, qScale int) book {
	t.Helper()
	var b book
	started := false
	apply := func(side map[int64]int64, lv any) {
		for _, l := range lv.([]any) {
			pq := l.([]any)
			p, q := dec(t, pq[0], pScale), dec(t, pq[1], qScale)
			if q == 0 {
				delete(side, p)
			} else {
				side[p] = q
			}
		}
	}
	for _, m := range msgs {
		if m["channel"] != "depth" || m["market"] != market || fmt.Sprint(m["outcome"]) != fmt.Sprint(outcomeOrNil(outcome)) {
			continue
		}
		switch m["type"] {
		case "snapshot":
			b = book{bids: map[int64]int64{}, asks: map[int64]int64{}, seq: uint64(m["seq"].(float64))}
			apply(b.bids, m["bids"])
			apply(b.asks, m["asks"])
			started = true
		case "diff":
			if !started {
				t.Fatalf("%s %s: a diff before the snapshot: %v", market, outcome, m)
			}
			if prev := uint64(m["prev_seq"].(float64)); prev != b.seq {
				t.Fatalf("%s %s: gap: prev_seq %d after seq %d", market, outcome, prev, b.seq)
			}
			first, last := uint64(m["first_seq"].(float64)), uint64(m["last_seq"].(float64))
			if first <= b.seq || last < first {
				t.Fatalf("%s %s: seqs %d..%d after %d", market, outcome, first, last, b.seq)
			}
			apply(b.bids, m["bids"])
			apply(b.asks, m["asks"])
			b.seq = last
		}
	}
	if !started {
		t.Fatalf("%s %s: no snapshot", market, outcome)
	}
	return b
}

func outcomeOrNil(o string) any {
	if o == "" {
		return nil
	}
	return o
}

// restBook is GET /api/v1/depth at its seq.
func restBook(t *testing.T, s *e2eServer, tok, path string, pScale, qScale int) book {
	t.Helper()
	st, d := s.do("GET", path, tok, nil)
	if st != 200 {
		t.Fatalf("GET %s: %d %v", path, st, d)
	}
	b := book{bids: map[int64]int64{}, asks: map[int64]int64{}, seq: id(t, d["seq"])}
	for _, side := range []struct {
		m map[int64]int64
		k string
	}{{b.bids, "bids"}, {b.asks, "asks"}} {
		for _, l := range d[side.k].([]any) {
			pq := l.([]any)
			side.m[dec(t, pq[0], pScale)] = dec(t, pq[1], qScale)
		}
	}
	return b
}

func sameBook(a, b book) bool {
	return fmt.Sprint(sortedLevels(a.bids)) == fmt.Sprint(sortedLevels(b.bids)) &&
		fmt.Sprint(sortedLevels(a.asks)) == fmt.Sprint(sortedLevels(b.asks))
}

func sortedLevels(m map[int64]int64) [][2]int64 {
	var out [][2]int64
	for p, q := range m {
		out = append(out, [2]int64{p, q})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// privateLog checks a private stream: every message once, seqs increasing.
type privateLog struct {
	last map[string]uint64 // channel -> last seq seen
	seen map[string]bool   // channel/seq
	// balances: asset -> [available, frozen] (snapshot + deltas)
	bal   map[string][2]int64
	fills map[uint64]int64    // order id -> filled quantity (units) from TRADE events
	ids   map[uint64]bool     // order ids seen
	xfers map[uint64][]string // transfer id -> statuses in order
	pos   map[string][2]int64 // binary market -> [yes, no] shares (the last POSITION)
	n     int                 // messages taken
}

var wsScales = map[string]int{"BTC": 8, "USDT": 6, "ETH": 8, "USD": 2}

func (p *privateLog) take(t *testing.T, msgs []map[string]any) {
	t.Helper()
	for _, m := range msgs[p.n:] {
		p.n++
		ch, _ := m["channel"].(string)
		if typ, _ := m["type"].(string); ch == "" || (typ != "" && typ != "snapshot") {
			continue // answers (subscribed, pong)
		}
		if m["type"] == "snapshot" {
			if ch == "balances" {
				for _, b := range m["balances"].([]any) {
					b := b.(map[string]any)
					a := b["asset"].(string)
					p.bal[a] = [2]int64{dec(t, b["available"], wsScales[a]), dec(t, b["frozen"], wsScales[a])}
				}
				p.last[ch] = uint64(m["seq"].(float64))
			}
			continue
		}
		seq := uint64(m["seq"].(float64))
		key := fmt.Sprint(ch, "/", seq)
		if p.seen[key] {
			t.Fatalf("%s seq %d delivered twice", ch, seq)
		}
		if seq <= p.last[ch] {
			t.Fatalf("%s seq %d after %d", ch, seq, p.last[ch])
		}
		p.seen[key], p.last[ch] = true, seq
		for _, e := range m["events"].([]any) {
			e := e.(map[string]any)
			switch ch {
			case "balances":
				a := e["asset"].(string)
				b := p.bal[a]
				p.bal[a] = [2]int64{b[0] + dec(t, e["d_available"], wsScales[a]), b[1] + dec(t, e["d_frozen"], wsScales[a])}
			case "transfers":
				x := id(t, e["transfer_id"])
				p.xfers[x] = append(p.xfers[x], e["status"].(string))
			case "positions":
				if e["event"] == "POSITION" {
					p.pos[e["market"].(string)] = [2]int64{int64(e["yes"].(float64)), int64(e["no"].(float64))}
				}
			case "orders":
				oid := id(t, e["order_id"])
				p.ids[oid] = true
				if e["event"] == "TRADE" {
					scale := 8
					if e["market"] == "77" {
						scale = 0
					}
					p.fills[oid] += dec(t, e["quantity"], scale)
				}
			}
		}
	}
}

func newPrivateLog() *privateLog {
	return &privateLog{last: map[string]uint64{}, seen: map[string]bool{}, bal: map[string][2]int64{},
		fills: map[uint64]int64{}, ids: map[uint64]bool{}, xfers: map[uint64][]string{}, pos: map[string][2]int64{}}
}

// TestWSStreams runs the WebSocket streams against the real binary, on one
// server (restarted once by SIGKILL): depth rebuilt from snapshot + diffs
// equals GET /depth at the same seq (spot, both outcomes of a binary
// market); a private stream gets every change of its user exactly once,
// across a forced reconnect with since and a SIGKILL + restart, and nothing
// of another user; a stalled reader is closed while orders keep being
// answered; an expired token closes the private channels; SIGTERM closes
// every socket with 1001.
func TestWSStreams(t *testing.T) {
	wsFlags := []string{"--ws-buffer", "256", "--ws-frame", "10ms", "--p2p-hold", "1s"}
	t.Parallel()
	dir := t.TempDir()
	s := e2eStart(t, dir, "", wsFlags...)
	admin := s.token(1000, true)
	const users = 6
	tok := map[uint64]string{}
	for u := uint64(1); u <= users+1; u++ {
		tok[u] = s.token(u, false)
		for _, a := range []string{"BTC", "USDT"} {
			if st, b := s.do("POST", "/admin/v1/adjust", admin, map[string]any{"user_id": u, "asset": a,
				"amount": "1000000", "ref": fmt.Sprint("ws-", u, a)}); st != 200 {
				t.Fatalf("adjust: %d %v", st, b)
			}
		}
	}
	if st, b := s.do("POST", "/admin/v1/binary-markets", admin, map[string]any{"market_id": 77, "quote": "USDT",
		"question": "ws?"}); st != 200 {
		t.Fatalf("binary market: %d %v", st, b)
	}
	if st, b := s.do("POST", "/admin/v1/binary-markets/77/activate", admin, nil); st != 200 {
		t.Fatalf("activate: %d %v", st, b)
	}

	pub := wsDial(t, s.addr, "", true)
	pub.subscribe(map[string]any{"channel": "depth", "market": "BTC-USDT"})
	pub.subscribe(map[string]any{"channel": "trades", "market": "BTC-USDT"})
	pub.subscribe(map[string]any{"channel": "ticker", "market": "BTC-USDT"})
	pub.subscribe(map[string]any{"channel": "depth", "market": "77", "outcome": "YES"})
	pub.subscribe(map[string]any{"channel": "depth", "market": "77", "outcome": "NO"})

	// User 1's private stream (token on connect), and user 7's, who never trades.
	priv := wsDial(t, s.addr, tok[1], true)
	for _, ch := range []string{"balances", "orders", "transfers", "positions"} {
		priv.subscribe(map[string]any{"channel": ch})
	}
	other := wsDial(t, s.addr, "", true)
	other.subscribe(map[string]any{"channel": "orders", "token": tok[7]})
	other.subscribe(map[string]any{"channel": "balances", "token": tok[7]})
	// Errors are answered with a code, and change nothing.
	for _, c := range []struct {
		msg  map[string]any
		code string
	}{
		{map[string]any{"op": "subscribe", "channel": "orders"}, stream.CodeUnauthorized},
		{map[string]any{"op": "subscribe", "channel": "depth", "market": "NOPE-USDT"}, stream.CodeInvalidMarket},
		{map[string]any{"op": "subscribe", "channel": "depth", "market": "BTC-USDT"}, stream.CodeAlreadySubscribed},
		{map[string]any{"op": "subscribe", "channel": "depth", "market": "78", "outcome": "YES"}, stream.CodeInvalidMarket},
		{map[string]any{"op": "dance"}, stream.CodeUnknownOp},
	} {
		id := pub.send(c.msg)
		if m := pub.waitFor(fmt.Sprint(c.msg), 20*time.Second, idIs(id)); m["type"] != "error" || m["code"] != c.code {
			t.Fatalf("%v: %v, want error %s", c.msg, m, c.code)
		}
	}
	// A token expiring in 2 s: its private channels are closed with TOKEN_EXPIRED.
	short, err := s.auth.Mint(3, false, 2*time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	exp := wsDial(t, s.addr, short, true)
	exp.subscribe(map[string]any{"channel": "orders"})

	// Spec 003 transfers between users 1 and 2 (the hold is 1 s): created,
	// one cancelled, the others completed.
	for i, h := range []string{"wsone", "wstwo"} {
		if st, b := s.do("POST", "/balance-service/users", admin, fmt.Sprintf(`{"userId":%q,"initialBalance":100,"id":%d}`, h, i+1)); st != 200 {
			t.Fatalf("p2p user: %d %v", st, b)
		}
	}
	myXfers := map[uint64]string{}
	transfer := func(cancel bool) {
		st, b := s.do("POST", "/transfers", tok[1], `{"fromUserId":"wsone","toUserId":"wstwo","amount":1.5}`)
		if st != 200 {
			t.Fatalf("transfer: %d %v", st, b)
		}
		x := uint64(b["transferId"].(float64))
		myXfers[x] = "PENDING,COMPLETED"
		if cancel {
			if st, b := s.do("POST", fmt.Sprint("/transfers/", x, "/cancel"), tok[1], nil); st != 200 {
				t.Fatalf("cancel transfer: %d %v", st, b)
			}
			myXfers[x] = "PENDING,CANCELLED"
		}
	}
	myOrders := map[uint64]bool{}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(36, 1))
	var rngMu sync.Mutex
	place := func(n int) {
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n/6; i++ {
					rngMu.Lock()
					u := uint64(1 + rng.IntN(users))
					var body map[string]any
					if rng.IntN(3) == 0 {
						out := []string{"YES", "NO"}[rng.IntN(2)]
						body = map[string]any{"market": "77", "outcome": out, "side": "BUY", "type": "LIMIT",
							"price": fmt.Sprintf("0.%02d", 30+rng.IntN(40)), "quantity": fmt.Sprint(1 + rng.IntN(20))}
					} else {
						side := []string{"BUY", "SELL"}[rng.IntN(2)]
						px := 100 + rng.IntN(40) - 20
						if side == "BUY" {
							px -= 3
						}
						body = map[string]any{"market": "BTC-USDT", "side": side, "type": "LIMIT", "time_in_force": "GTC",
							"price": fmt.Sprint(px), "quantity": fmt.Sprintf("0.%04d", 1+rng.IntN(50))}
					}
					cancel := rng.IntN(5) == 0
					rngMu.Unlock()
					st, o := s.do("POST", "/api/v1/order", tok[u], body)
					if st != 200 {
						t.Errorf("order %v: %d %v", body, st, o)
						return
					}
					oid := id(t, o["order_id"])
					if u == 1 {
						mu.Lock()
						myOrders[oid] = true
						mu.Unlock()
					}
					if cancel && (o["status"] == "NEW" || o["status"] == "PARTIALLY_FILLED") {
						s.do("DELETE", fmt.Sprint("/api/v1/order/", oid), tok[u], nil)
					}
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}

	checkBooks := func(s *e2eServer, pub *wsClient) {
		t.Helper()
		for _, c := range []struct {
			market, outcome, path string
			q                     int
		}{
			{"BTC-USDT", "", "/api/v1/depth/BTC-USDT?limit=1000", 8},
			{"77", "YES", "/api/v1/depth/77?outcome=YES&limit=1000", 0},
			{"77", "NO", "/api/v1/depth/77?outcome=NO&limit=1000", 0},
		} {
			rest := restBook(t, s, tok[1], c.path, 6, c.q)
			pub.caughtUp(rest.seq)
			got := rebuildBook(t, pub.all(), c.market, c.outcome, 6, c.q)
			if got.seq > rest.seq {
				t.Fatalf("%s %s: the stream is at seq %d, past the REST view's %d (no order was placed since)", c.market, c.outcome, got.seq, rest.seq)
			}
			if !sameBook(got, rest) {
				t.Fatalf("%s %s at seq %d: rebuilt %v / %v, GET /depth %v / %v", c.market, c.outcome, rest.seq,
					sortedLevels(got.bids), sortedLevels(got.asks), sortedLevels(rest.bids), sortedLevels(rest.asks))
			}
			if len(rest.bids)+len(rest.asks) == 0 {
				t.Fatalf("%s %s: an empty book proves nothing", c.market, c.outcome)
			}
		}
	}
	plog := newPrivateLog()
	checkPrivate := func(s *e2eServer, priv *wsClient) {
		t.Helper()
		_, d := s.do("GET", "/api/v1/depth/BTC-USDT", tok[1], nil)
		priv.caughtUp(id(t, d["seq"]))
		plog.take(t, priv.all())
		want := balances(t, s, 1)
		for _, a := range []string{"BTC", "USDT"} {
			if plog.bal[a] != want[a] {
				t.Fatalf("user 1's %s: snapshot + deltas %v, GET /balances %v", a, plog.bal[a], want[a])
			}
		}
		for x, want := range myXfers {
			if got := strings.Join(plog.xfers[x], ","); got != want {
				t.Fatalf("transfer %d: the stream says %s, want %s", x, got, want)
			}
		}
		if len(plog.xfers) != len(myXfers) {
			t.Fatalf("transfers %v, made %v", plog.xfers, myXfers)
		}
		_, ps := s.do("GET", "/api/v1/positions", tok[1], nil)
		for _, p := range ps["positions"].([]any) {
			p := p.(map[string]any)
			m := fmt.Sprint(id(t, p["market_id"]))
			if got := plog.pos[m]; fmt.Sprint(got[0], got[1]) != fmt.Sprint(p["yes_volume"], p["no_volume"]) {
				t.Fatalf("position in %s: the stream says %v, GET /positions %v", m, got, p)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for oid := range plog.ids {
			if !myOrders[oid] {
				t.Fatalf("user 1's stream carries order %d, not theirs", oid)
			}
		}
		for oid := range myOrders {
			if !plog.ids[oid] {
				t.Fatalf("user 1's order %d never arrived", oid)
			}
			st, o := s.do("GET", fmt.Sprint("/api/v1/order/", oid), tok[1], nil)
			if st != 200 {
				t.Fatalf("order %d: %d %v", oid, st, o)
			}
			scale := 8
			if o["market"] == "77" {
				scale = 0
			}
			filled := o["filled_quantity"]
			if filled == nil {
				filled = fmt.Sprint(o["filled"])
			}
			if f := dec(t, filled, scale); f != plog.fills[oid] {
				t.Fatalf("order %d: filled %d, the stream's fills add up to %d", oid, f, plog.fills[oid])
			}
		}
	}

	transfer(false)
	transfer(true)
	place(600)
	transfer(false)
	// A forced reconnect: the private stream resumes with since.
	plog.take(t, priv.all())
	_ = priv.c.Close()
	place(300)
	priv = wsDial(t, s.addr, tok[1], true)
	for _, ch := range []string{"balances", "orders", "transfers", "positions"} {
		priv.subscribe(map[string]any{"channel": ch, "since": plog.last[ch]})
	}
	plog.n = 0
	place(600)
	time.Sleep(1500 * time.Millisecond) // the transfers' hold passes: they execute
	checkBooks(s, pub)
	checkPrivate(s, priv)
	if len(other.all()) != 3 { // two answers and the balances snapshot
		t.Fatalf("user 7, who never traded, got %v", other.all())
	}
	exp.waitFor("token expiry", 20*time.Second, func(m map[string]any) bool {
		return m["type"] == "closed" && m["code"] == stream.CodeTokenExpired && m["channel"] == "orders"
	})

	// A stalled reader is closed (4008); every order meanwhile is answered.
	stall := wsDial(t, s.addr, "", false)
	for _, ch := range []string{"depth", "trades", "ticker"} {
		if err := stall.c.WriteJSON(map[string]any{"op": "subscribe", "channel": ch, "market": "BTC-USDT"}); err != nil {
			t.Fatal(err)
		}
		if err := stall.c.WriteJSON(map[string]any{"op": "subscribe", "channel": ch, "market": "77", "outcome": "YES"}); err != nil {
			t.Fatal(err)
		}
	}
	// It also asks for depth snapshots again and again (without reading the answers).
	dropped := s.metric("ubs_ws_dropped_total")
	for i := 0; s.metric("ubs_ws_dropped_total") == dropped; i++ {
		if i == 40 {
			t.Fatalf("a stalled reader was not closed")
		}
		for _, op := range []string{"unsubscribe", "subscribe"} {
			for _, m := range []map[string]any{{"market": "BTC-USDT"}, {"market": "77", "outcome": "YES"}, {"market": "77", "outcome": "NO"}} {
				m["op"], m["channel"] = op, "depth"
				_ = stall.c.SetWriteDeadline(time.Now().Add(time.Second))
				_ = stall.c.WriteJSON(m) // fails once the server has closed it
			}
		}
		place(60)
	}
	// SIGKILL, restart on the same data dir: the private stream resumes with since.
	plog.take(t, priv.all())
	s.Kill()
	s = e2eStart(t, dir, "", wsFlags...)
	priv = wsDial(t, s.addr, tok[1], true)
	for _, ch := range []string{"balances", "orders", "transfers", "positions"} {
		priv.subscribe(map[string]any{"channel": ch, "since": plog.last[ch]})
	}
	plog.n = 0
	pub = wsDial(t, s.addr, "", true)
	pub.subscribe(map[string]any{"channel": "depth", "market": "BTC-USDT"})
	pub.subscribe(map[string]any{"channel": "depth", "market": "77", "outcome": "YES"})
	pub.subscribe(map[string]any{"channel": "depth", "market": "77", "outcome": "NO"})
	place(300)
	checkBooks(s, pub)
	checkPrivate(s, priv)

	// SIGTERM closes every socket with 1001.
	s.Stop()
	for _, c := range []*wsClient{pub, priv} {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Fatal("a socket outlived the server")
		}
		var ce *websocket.CloseError
		if !errors.As(c.err, &ce) || ce.Code != websocket.CloseGoingAway {
			t.Fatalf("socket closed with %v, want 1001", c.err)
		}
	}
}

// TestWSFunding: the funding channel (FUNDING lives in Postgres): a
// snapshot of the caller's FUNDING balances on subscribe, then each state
// change of their internal transfers with the balances after it; nothing
// of another user's.
func TestWSFunding(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewDB(t)
	s := e2eStart(t, t.TempDir(), pg)
	admin := s.token(1000, true)
	for _, u := range []uint64{5, 6} {
		if st, b := s.do("POST", "/admin/v1/deposit", admin, map[string]any{"user_id": u, "asset": "USDT", "amount": "1000",
			"tx_ref": fmt.Sprint("ws-funding-", u)}); st != 200 {
			t.Fatalf("deposit: %d %v", st, b)
		}
	}
	usdt := func(m map[string]any) int64 {
		for _, b := range m["balances"].([]any) {
			if b := b.(map[string]any); b["asset"] == "USDT" {
				return dec(t, b["available"], 6)
			}
		}
		return -1
	}
	mine, other := wsDial(t, s.addr, s.token(5, false), true), wsDial(t, s.addr, s.token(6, false), true)
	mine.subscribe(map[string]any{"channel": "funding"})
	other.subscribe(map[string]any{"channel": "funding"})
	snap := mine.waitFor("funding snapshot", 20*time.Second, func(m map[string]any) bool { return m["type"] == "snapshot" })
	if usdt(snap) != 1000_000000 {
		t.Fatalf("snapshot %v", snap)
	}
	for _, x := range []struct {
		from, to, amount string
		after            int64
	}{{"FUNDING", "SPOT", "100", 900_000000}, {"SPOT", "FUNDING", "40", 940_000000}} {
		st, b := s.do("POST", "/api/v1/internal_transfer", s.token(5, false), map[string]any{"from": x.from, "to": x.to,
			"asset": "USDT", "amount": x.amount})
		if st != 200 || b["state"] != "COMMITTED" {
			t.Fatalf("transfer: %d %v", st, b)
		}
		tid := fmt.Sprint(b["transfer_id"])
		m := mine.waitFor("COMMITTED "+tid, 20*time.Second, func(m map[string]any) bool {
			tr, _ := m["transfer"].(map[string]any)
			return tr != nil && fmt.Sprint(tr["transfer_id"]) == tid && tr["state"] == "COMMITTED"
		})
		if usdt(m) != x.after {
			t.Fatalf("%s->%s: FUNDING USDT after COMMITTED %d, want %d: %v", x.from, x.to, usdt(m), x.after, m)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(other.all()); n != 2 { // the answer and its snapshot
		t.Fatalf("user 6 got %v", other.all())
	}
}
