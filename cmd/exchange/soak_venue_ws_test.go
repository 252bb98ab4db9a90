package main

import (
	"strconv"

	"github.com/ubscore/ubscore/stream"
	"github.com/ubscore/ubscore/stream/streamtest"
)

// The WebSocket streams in the whole-venue soak (issue 36): a client of
// one trader's private channels (orders, balances) and of BTC-USDT's
// depth stays connected through the run as a real client would: after
// every restart (and whenever its socket ends) it reconnects and
// resubscribes with since = the last seq it has taken, so the WAL replays
// what it missed. At the end:
//   - every private message was taken once (a repeat or a seq going back
//     fails the run: streamtest.PrivateLog);
//   - the balances rebuilt from the snapshot and the deltas equal GET
//     /api/v1/balances;
//   - every order the trader was told accepted was on the orders stream,
//     and the fills it carried add up to each order's filled quantity;
//   - the depth rebuilt from the last connection's snapshot and diffs
//     equals GET /api/v1/depth at the same seq.
type svWS struct {
	v       *soak
	user    uint64
	priv    *streamtest.Client
	pub     *streamtest.Client
	log     *streamtest.PrivateLog
	covered uint64 // every private message of seq <= covered was taken (a pong's seq)
	conns   int
	resyncs int // subscriptions whose since the WAL no longer held
}

// svWSChannels are the trader's private channels the soak follows.
var svWSChannels = []string{"orders", "balances"}

func svWSQtyScale(market string) int {
	if _, err := strconv.Atoi(market); err == nil {
		return 0 // a binary market (by id): whole shares
	}
	return 8 // BTC-USDT, ETH-USDT: the base's 8 decimals
}

// wsConnect (re)connects the soak's stream client to the process just
// started: it takes what the old sockets delivered, then subscribes again
// with since.
func (v *soak) wsConnect() {
	v.t.Helper()
	if v.ws == nil {
		v.ws = &svWS{v: v, user: svTraders[0], log: streamtest.NewPrivateLog(wsScales, svWSQtyScale)}
	}
	w := v.ws
	w.take()
	w.conns++
	w.priv = streamtest.Dial(v.t, v.s.addr, streamtest.Options{Token: v.s.token(w.user, false)})
	w.log.N = 0
	for _, ch := range svWSChannels {
		req := map[string]any{"channel": ch}
		since := max(w.log.Last[ch], w.covered)
		if w.conns > 1 {
			req["since"] = since
		}
		req["op"] = "subscribe"
		if m := w.priv.Ask(req); m["type"] != "subscribed" {
			if m["code"] != stream.CodeResync {
				v.t.Fatalf("stream: subscribe %v: %v", req, m)
			}
			// Too old: a real client starts over from a snapshot (balances)
			// or from now (orders, whose completeness is then unchecked).
			w.resyncs++
			v.log("stream", "%s since %d: %v", ch, since, m["code"])
			delete(req, "since")
			w.priv.Subscribe(req)
		}
	}
	w.pong()
	w.pub = streamtest.Dial(v.t, v.s.addr, streamtest.Options{})
	w.pub.Subscribe(map[string]any{"channel": "depth", "market": "BTC-USDT"})
}

// pong pings the private socket: its answer's seq covers every private
// message queued before it.
func (w *svWS) pong() {
	m := w.priv.Ask(map[string]any{"op": "ping"})
	w.covered = max(w.covered, uint64(m["seq"].(float64)))
}

// take applies what the private socket delivered so far.
func (w *svWS) take() {
	if w.priv == nil {
		return
	}
	msgs := w.priv.All()
	w.log.Take(w.v.t, msgs)
	for _, m := range msgs {
		if m["type"] == "pong" {
			w.covered = max(w.covered, uint64(m["seq"].(float64)))
		}
	}
}

// wsCheckpoint is called with the history checks: a socket the server
// closed (a slow consumer, say) reconnects with since, as a client would.
func (v *soak) wsCheckpoint() {
	if v.ws == nil || v.ws.priv == nil {
		return
	}
	select {
	case <-v.ws.priv.Done():
		v.log("stream", "socket ended (%v): reconnecting with since", v.ws.priv.Err())
		v.wsConnect()
	default:
		v.ws.take()
	}
}

// wsFinish checks the streams against the REST view once nothing moves.
func (v *soak) wsFinish() {
	t := v.t
	t.Helper()
	v.wsCheckpoint()
	w := v.ws
	_, d := v.get200("/api/v1/depth/BTC-USDT?limit=1000", w.user)
	rest := streamtest.RESTBook(t, d, 6, 8)
	w.priv.CaughtUp(rest.Seq)
	w.pub.CaughtUp(rest.Seq)
	w.take()
	if got := streamtest.RebuildBook(t, w.pub.All(), "BTC-USDT", "", 6, 8); got.Seq > rest.Seq || !got.Same(rest) {
		v.contra++
		t.Errorf("stream: BTC-USDT depth rebuilt from the stream %v, GET /depth %v", got, rest)
	}
	want := balances(t, v.s, w.user)
	for a, b := range want {
		if w.log.Bal[a] != b {
			v.contra++
			t.Errorf("stream: user %d's %s: snapshot + deltas %v, GET /balances %v", w.user, a, w.log.Bal[a], b)
		}
	}
	orders, fills := 0, 0
	for oid, o := range v.orders {
		if o.user != w.user || w.resyncs > 0 {
			continue
		}
		orders++
		if !w.log.IDs[oid] {
			v.lost++
			t.Errorf("stream: order %d (told %s) never on user %d's orders stream", oid, o.status, w.user)
			continue
		}
		if end, ok := v.atEnd[oid]; ok {
			fills++
			if f, _ := end[1].(int64); f != w.log.Fills[oid] {
				v.contra++
				t.Errorf("stream: order %d filled %d, its TRADE events on the stream add up to %d", oid, f, w.log.Fills[oid])
			}
		}
	}
	if orders == 0 || len(w.log.Bal) == 0 {
		t.Errorf("stream: nothing to check (orders %d, balances %v): the check proves nothing", orders, w.log.Bal)
	}
	t.Logf("venue soak streams: %d connections, %d resyncs; %d orders (%d with fills checked) of user %d compared with its stream, balances and BTC-USDT depth compared at seq %d",
		w.conns, w.resyncs, orders, fills, w.user, rest.Seq)
}
