package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/stream"
	"github.com/ubscore/ubscore/stream/streamtest"
)

// wsScales are the decimals of the assets the WebSocket tests meet.
var wsScales = map[string]int{"BTC": 8, "USDT": 6, "ETH": 8, "USD": 2}

// wsQtyScale is the quantity decimals of a market's orders (binary 77:
// whole shares; spot: BTC's 8).
func wsQtyScale(market string) int {
	if market == "77" {
		return 0
	}
	return 8
}

// restBook is GET path (a depth) at its seq.
func restBook(t *testing.T, s *e2eServer, tok, path string, pScale, qScale int) streamtest.Book {
	t.Helper()
	st, d := s.do("GET", path, tok, nil)
	if st != 200 {
		t.Fatalf("GET %s: %d %v", path, st, d)
	}
	return streamtest.RESTBook(t, d, pScale, qScale)
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

	pub := streamtest.Dial(t, s.addr, streamtest.Options{Token: ""})
	pub.Subscribe(map[string]any{"channel": "depth", "market": "BTC-USDT"})
	pub.Subscribe(map[string]any{"channel": "trades", "market": "BTC-USDT"})
	pub.Subscribe(map[string]any{"channel": "ticker", "market": "BTC-USDT"})
	pub.Subscribe(map[string]any{"channel": "depth", "market": "77", "outcome": "YES"})
	pub.Subscribe(map[string]any{"channel": "depth", "market": "77", "outcome": "NO"})

	// User 1's private stream (token on connect), and user 7's, who never trades.
	priv := streamtest.Dial(t, s.addr, streamtest.Options{Token: tok[1]})
	for _, ch := range []string{"balances", "orders", "transfers", "positions"} {
		priv.Subscribe(map[string]any{"channel": ch})
	}
	other := streamtest.Dial(t, s.addr, streamtest.Options{Token: ""})
	other.Subscribe(map[string]any{"channel": "orders", "token": tok[7]})
	other.Subscribe(map[string]any{"channel": "balances", "token": tok[7]})
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
		id := pub.Send(c.msg)
		if m := pub.WaitFor(fmt.Sprint(c.msg), 20*time.Second, streamtest.IDIs(id)); m["type"] != "error" || m["code"] != c.code {
			t.Fatalf("%v: %v, want error %s", c.msg, m, c.code)
		}
	}
	// A token expiring in 2 s: its private channels are closed with TOKEN_EXPIRED.
	short, err := s.auth.Mint(3, false, 2*time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	exp := streamtest.Dial(t, s.addr, streamtest.Options{Token: short})
	exp.Subscribe(map[string]any{"channel": "orders"})

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

	checkBooks := func(s *e2eServer, pub *streamtest.Client) {
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
			pub.CaughtUp(rest.Seq)
			got := streamtest.RebuildBook(t, pub.All(), c.market, c.outcome, 6, c.q)
			if got.Seq > rest.Seq {
				t.Fatalf("%s %s: the stream is at seq %d, past the REST view's %d (no order was placed since)", c.market, c.outcome, got.Seq, rest.Seq)
			}
			if !got.Same(rest) {
				t.Fatalf("%s %s at seq %d: rebuilt %v, GET /depth %v", c.market, c.outcome, rest.Seq, got, rest)
			}
			if len(rest.Bids)+len(rest.Asks) == 0 {
				t.Fatalf("%s %s: an empty book proves nothing", c.market, c.outcome)
			}
		}
	}
	plog := streamtest.NewPrivateLog(wsScales, wsQtyScale)
	checkPrivate := func(s *e2eServer, priv *streamtest.Client) {
		t.Helper()
		_, d := s.do("GET", "/api/v1/depth/BTC-USDT", tok[1], nil)
		priv.CaughtUp(id(t, d["seq"]))
		plog.Take(t, priv.All())
		want := balances(t, s, 1)
		for _, a := range []string{"BTC", "USDT"} {
			if plog.Bal[a] != want[a] {
				t.Fatalf("user 1's %s: snapshot + deltas %v, GET /balances %v", a, plog.Bal[a], want[a])
			}
		}
		for x, want := range myXfers {
			if got := strings.Join(plog.Xfers[x], ","); got != want {
				t.Fatalf("transfer %d: the stream says %s, want %s", x, got, want)
			}
		}
		if len(plog.Xfers) != len(myXfers) {
			t.Fatalf("transfers %v, made %v", plog.Xfers, myXfers)
		}
		_, ps := s.do("GET", "/api/v1/positions", tok[1], nil)
		for _, p := range ps["positions"].([]any) {
			p := p.(map[string]any)
			m := fmt.Sprint(id(t, p["market_id"]))
			if got := plog.Pos[m]; fmt.Sprint(got[0], got[1]) != fmt.Sprint(p["yes_volume"], p["no_volume"]) {
				t.Fatalf("position in %s: the stream says %v, GET /positions %v", m, got, p)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for oid := range plog.IDs {
			if !myOrders[oid] {
				t.Fatalf("user 1's stream carries order %d, not theirs", oid)
			}
		}
		for oid := range myOrders {
			if !plog.IDs[oid] {
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
			if f := dec(t, filled, scale); f != plog.Fills[oid] {
				t.Fatalf("order %d: filled %d, the stream's fills add up to %d", oid, f, plog.Fills[oid])
			}
		}
	}

	transfer(false)
	transfer(true)
	place(600)
	transfer(false)
	// A forced reconnect: the private stream resumes with since.
	plog.Take(t, priv.All())
	_ = priv.Conn().Close()
	place(300)
	priv = streamtest.Dial(t, s.addr, streamtest.Options{Token: tok[1]})
	for _, ch := range []string{"balances", "orders", "transfers", "positions"} {
		priv.Subscribe(map[string]any{"channel": ch, "since": plog.Last[ch]})
	}
	plog.N = 0
	place(600)
	time.Sleep(1500 * time.Millisecond) // the transfers' hold passes: they execute
	checkBooks(s, pub)
	checkPrivate(s, priv)
	if len(other.All()) != 3 { // two answers and the balances snapshot
		t.Fatalf("user 7, who never traded, got %v", other.All())
	}
	exp.WaitFor("token expiry", 20*time.Second, func(m map[string]any) bool {
		return m["type"] == "closed" && m["code"] == stream.CodeTokenExpired && m["channel"] == "orders"
	})

	// A stalled reader is closed (4008); every order meanwhile is answered.
	stall := streamtest.Dial(t, s.addr, streamtest.Options{Token: "", Stalled: true})
	for _, ch := range []string{"depth", "trades", "ticker"} {
		if err := stall.Conn().WriteJSON(map[string]any{"op": "subscribe", "channel": ch, "market": "BTC-USDT"}); err != nil {
			t.Fatal(err)
		}
		if err := stall.Conn().WriteJSON(map[string]any{"op": "subscribe", "channel": ch, "market": "77", "outcome": "YES"}); err != nil {
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
				_ = stall.Conn().SetWriteDeadline(time.Now().Add(time.Second))
				_ = stall.Conn().WriteJSON(m) // fails once the server has closed it
			}
		}
		place(60)
	}
	// SIGKILL, restart on the same data dir: the private stream resumes with since.
	plog.Take(t, priv.All())
	s.Kill()
	s = e2eStart(t, dir, "", wsFlags...)
	priv = streamtest.Dial(t, s.addr, streamtest.Options{Token: tok[1]})
	for _, ch := range []string{"balances", "orders", "transfers", "positions"} {
		priv.Subscribe(map[string]any{"channel": ch, "since": plog.Last[ch]})
	}
	plog.N = 0
	pub = streamtest.Dial(t, s.addr, streamtest.Options{Token: ""})
	pub.Subscribe(map[string]any{"channel": "depth", "market": "BTC-USDT"})
	pub.Subscribe(map[string]any{"channel": "depth", "market": "77", "outcome": "YES"})
	pub.Subscribe(map[string]any{"channel": "depth", "market": "77", "outcome": "NO"})
	place(300)
	checkBooks(s, pub)
	checkPrivate(s, priv)

	// SIGTERM closes every socket with 1001.
	s.Stop()
	for _, c := range []*streamtest.Client{pub, priv} {
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("a socket outlived the server")
		}
		var ce *websocket.CloseError
		if !errors.As(c.Err(), &ce) || ce.Code != websocket.CloseGoingAway {
			t.Fatalf("socket closed with %v, want 1001", c.Err())
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
	mine, other := streamtest.Dial(t, s.addr, streamtest.Options{Token: s.token(5, false)}), streamtest.Dial(t, s.addr, streamtest.Options{Token: s.token(6, false)})
	mine.Subscribe(map[string]any{"channel": "funding"})
	other.Subscribe(map[string]any{"channel": "funding"})
	snap := mine.WaitFor("funding snapshot", 20*time.Second, func(m map[string]any) bool { return m["type"] == "snapshot" })
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
		m := mine.WaitFor("COMMITTED "+tid, 20*time.Second, func(m map[string]any) bool {
			tr, _ := m["transfer"].(map[string]any)
			return tr != nil && fmt.Sprint(tr["transfer_id"]) == tid && tr["state"] == "COMMITTED"
		})
		if usdt(m) != x.after {
			t.Fatalf("%s->%s: FUNDING USDT after COMMITTED %d, want %d: %v", x.from, x.to, usdt(m), x.after, m)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(other.All()); n != 2 { // the answer and its snapshot
		t.Fatalf("user 6 got %v", other.All())
	}
}
