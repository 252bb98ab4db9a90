package stream

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist/transfer"
)

// Defaults of Config.
const (
	DefaultMaxConns     = 10_000
	DefaultMaxSubs      = 64
	DefaultBuffer       = 4096
	DefaultFrame        = 100 * time.Millisecond
	DefaultWriteTimeout = 5 * time.Second
	// DepthLevels is how many price levels per side a depth stream keeps
	// (gateway.MaxDepthLimit: the deepest GET /api/v1/depth).
	DepthLevels = gateway.MaxDepthLimit
	// MaxFrame is the longest a depth frame is conflated (the protocol's promise).
	MaxFrame = 100 * time.Millisecond
	// maxReplays bounds the `since` replays running at once (each one
	// rebuilds a replica of the core from a snapshot and the WAL).
	maxReplays  = 4
	followBatch = 4096
)

// WAL is the journal the hub follows (journal.Pipeline).
type WAL interface {
	NewFollower(from core.Seq) (*journal.Follower, error)
	DurableSeq() core.Seq
}

// Config configures New. Registry, Auth and WAL are required.
type Config struct {
	Registry *gateway.Registry
	Auth     *gateway.Authenticator
	WAL      WAL
	Logger   *slog.Logger

	MaxConns     int           // open sockets (0: DefaultMaxConns); beyond: 503 before the upgrade
	MaxSubs      int           // subscriptions per socket (0: DefaultMaxSubs)
	Buffer       int           // messages queued per socket (0: DefaultBuffer); full: closed 4008
	Frame        time.Duration // conflation of depth/trades/ticker (0: DefaultFrame; at most MaxFrame)
	WriteTimeout time.Duration // one write to a socket (0: DefaultWriteTimeout); past it: closed 4008
	Now          func() time.Time
}

// Hub is the WebSocket fan-out: a follower of the durable WAL (like the
// Postgres sink) that turns the core's events into public and private
// streams. Create it with New, run Run on one goroutine, serve Handler
// (or Wrap) over HTTP, Close on shutdown.
type Hub struct {
	cfg Config
	log *slog.Logger
	met metrics

	mu        sync.Mutex
	conns     map[*conn]struct{}
	closed    bool
	streams   map[skey]*mstream
	byMarket  map[core.MarketID][]*mstream
	users     map[core.UserID][]*privSub
	pwait     []*privSub // private subscriptions to activate on the hub goroutine
	delivered core.Seq   // private messages of every seq <= delivered have been handed out
	pb        privBuilder
	lv        levelsScratch

	flushed  atomic.Uint64 // every channel has been handed out through this seq (pong)
	running  atomic.Bool
	ctx      context.Context
	replays  chan struct{}
	w        *writer // writes every socket (writer.go)
	stopOnce sync.Once
	// funding channel (funding.go): nil until SetFunding
	funding   FundingSource
	fundingCh chan transfer.Transfer
	wg        sync.WaitGroup // connections and replays
}

// New returns a hub for cfg.
func New(cfg Config) *Hub {
	if cfg.Registry == nil || cfg.Auth == nil || cfg.WAL == nil {
		panic("stream: New needs Registry, Auth and WAL")
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxSubs <= 0 {
		cfg.MaxSubs = DefaultMaxSubs
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.Frame <= 0 {
		cfg.Frame = DefaultFrame
	}
	cfg.Frame = min(cfg.Frame, MaxFrame)
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Hub{cfg: cfg, log: cfg.Logger, conns: map[*conn]struct{}{}, streams: map[skey]*mstream{},
		byMarket: map[core.MarketID][]*mstream{}, users: map[core.UserID][]*privSub{},
		replays: make(chan struct{}, maxReplays), ctx: context.Background()}
	h.w = newWriter(h)
	go h.w.run()
	return h
}

// skey names a public stream: a market, and an outcome for a binary market.
type skey struct {
	market core.MarketID
	out    core.Outcome
}

// mstream is one market's (or outcome's) public streams.
type mstream struct {
	key      skey
	info     marketInfo
	resolved bool
	subs     [3]map[*conn]uint64 // depth, trades, ticker subscribers (value: unused)
	waiting  []waiter            // subscriptions answered at the next flush
	bids     []core.PriceLevel   // the book at lastSeq (top DepthLevels)
	asks     []core.PriceLevel
	lastSeq  core.Seq // last_seq of the last depth message (the book has not changed since)
	first    core.Seq // first seq that touched the market in this frame (0: none)
	trades   []byte   // this frame's trades, comma separated JSON objects
	traded   bool
	lastPx   core.Price
	lastQty  core.Units
	hasLast  bool
}

type waiter struct {
	c  *conn
	ch Channel
	id uint64
}

func pubIdx(ch Channel) int { return int(ch - ChDepth) }

func (s *mstream) empty() bool {
	return len(s.waiting) == 0 && len(s.subs[0])+len(s.subs[1])+len(s.subs[2]) == 0
}

// privSub is one socket's subscription to one private channel.
type privSub struct {
	c         *conn
	user      core.UserID
	ch        Channel
	id        uint64
	since     core.Seq
	hasSince  bool
	minSeq    core.Seq // live messages of seqs <= minSeq are not sent (the replay or the snapshot covers them)
	replaying bool
	pending   [][]byte // live messages held while replaying
	active    bool
	gone      atomic.Bool // unsubscribed (a replay in flight stops)
	// replayed: with since, every message of seqs <= replayed is queued
	// (since, then the replay's progress); until the subscription is live
	// it bounds the seq of the socket's pong (pongSeq).
	replayed atomic.Uint64
}

// Run follows the WAL from its durable end until ctx ends (or the
// pipeline stops), handing messages to the sockets. It never blocks the
// pipeline: it reads the WAL on its own goroutine, and a socket that
// cannot keep up is closed.
func (h *Hub) Run(ctx context.Context) {
	h.mu.Lock()
	h.ctx = ctx
	h.mu.Unlock()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := h.follow(ctx)
		if ctx.Err() != nil || errors.Is(err, journal.ErrStopped) {
			return
		}
		h.met.errors.Add(1)
		h.log.Error("stream: follower stopped; every socket is closed, restarting", "err", err)
		h.reset()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// reset closes every socket (after a follower failure its streams have a gap).
func (h *Hub) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.conns {
		c.kill(CloseInternal, "stream restarted: resubscribe")
	}
}

func (h *Hub) follow(ctx context.Context) error {
	f, err := h.cfg.WAL.NewFollower(h.cfg.WAL.DurableSeq() + 1)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.delivered = f.NextSeq() - 1
	h.flushed.Store(uint64(h.delivered))
	h.mu.Unlock()
	h.running.Store(true)
	defer h.running.Store(false)
	lastFlush := time.Now()
	for {
		wait := max(h.cfg.Frame-time.Since(lastFlush), time.Millisecond)
		nctx, cancel := context.WithTimeout(ctx, wait)
		recs, err := f.Next(nctx, followBatch)
		cancel()
		if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
		n := namer{reg: h.cfg.Registry, p: f.Processor()}
		h.mu.Lock()
		for _, r := range recs {
			h.apply(r, n)
		}
		h.activate(n)
		if now := time.Now(); now.Sub(lastFlush) >= h.cfg.Frame {
			h.flush(f.Processor(), n)
			lastFlush = now
		}
		h.mu.Unlock()
	}
}

// apply takes in one durable command: marks the markets it touched,
// gathers their trades, and hands out its private messages.
func (h *Hub) apply(r journal.FollowRecord, n namer) {
	seq := r.Cmd.Seq
	for i := range r.Events {
		e := &r.Events[i]
		if e.Market == 0 {
			continue
		}
		for _, s := range h.byMarket[e.Market] {
			if s.first == 0 {
				s.first = seq
			}
			if e.Kind == core.EvTrade && s.resolved {
				s.addTrade(e, seq)
			}
		}
	}
	if len(h.users) > 0 {
		h.pb.msgs = h.pb.msgs[:0]
		h.pb.build(r.Cmd, r.Events, h.wantLive, n)
		for i := range h.pb.msgs {
			h.deliver(&h.pb.msgs[i])
		}
	}
	h.delivered = seq
}

func (h *Hub) wantLive(u core.UserID, ch Channel) bool {
	for _, ps := range h.users[u] {
		if ps.ch == ch && ps.active {
			return true
		}
	}
	return false
}

func (h *Hub) deliver(m *privMsg) {
	for _, ps := range h.users[m.user] {
		if ps.ch != m.ch || !ps.active || m.seq <= ps.minSeq {
			continue
		}
		if ps.replaying {
			if len(ps.pending) >= h.cfg.Buffer {
				ps.c.kill(CloseSlow, "buffer full")
				continue
			}
			ps.pending = append(ps.pending, m.data)
			continue
		}
		ps.c.send(m.data)
	}
}

func (s *mstream) addTrade(e *core.Event, seq core.Seq) {
	px, side := e.Price, e.Side
	if s.info.binary {
		px = ownPrice(e.Price, e.Payout, s.key.out)
		if s.key.out == core.OutcomeNo {
			side = 3 - side // the book's BUY of YES is a SELL of NO
		}
	}
	s.lastPx, s.lastQty, s.hasLast, s.traded = px, e.Qty, true, true
	if len(s.subs[pubIdx(ChTrades)]) == 0 {
		return
	}
	b := s.trades
	if len(b) > 0 {
		b = append(b, ',')
	}
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, uint64(seq), 10)
	b = appendUintKV(b, "trade_id", e.TradeID)
	b = appendUnitsKV(b, "price", int64(px), s.info.priceScale)
	b = appendUnitsKV(b, "quantity", int64(e.Qty), s.info.qtyScale)
	b = appendStrKV(b, "taker_side", side.String())
	b = appendUintKV(b, "time", uint64(e.Time/1_000_000))
	s.trades = append(b, '}')
}

// levelsScratch holds the depth being computed.
type levelsScratch struct {
	bids, asks, dbids, dasks []core.PriceLevel
	buf                      []byte
}

func depthOf(p *core.Processor, k skey, bids, asks []core.PriceLevel) ([]core.PriceLevel, []core.PriceLevel, bool) {
	if k.out != 0 {
		return p.BinaryDepth(k.market, k.out, DepthLevels, bids, asks)
	}
	return p.Depth(k.market, DepthLevels, bids, asks)
}

// flush sends every touched stream's depth diff, trades and ticker for the
// frame ending at the replica's seq, then answers new public subscriptions.
func (h *Hub) flush(p *core.Processor, n namer) {
	seq := p.LastSeq()
	for k, s := range h.streams {
		if !s.resolved {
			if !h.resolve(p, n, s) {
				for _, w := range s.waiting {
					w.c.sendError(w.id, CodeInvalidMarket, "no such market (or outcome) in the core")
					w.c.forget(subKey{ch: w.ch, s: k})
				}
				h.dropStream(s)
				continue
			}
		} else if s.first != 0 {
			h.frame(p, s, seq)
		}
		for _, w := range s.waiting {
			h.welcome(s, w)
		}
		s.waiting = s.waiting[:0]
		if s.empty() {
			h.dropStream(s)
		}
	}
	h.flushed.Store(uint64(seq))
}

// resolve takes a new stream's first book (at the replica's seq).
func (h *Hub) resolve(p *core.Processor, n namer, s *mstream) bool {
	mi, ok := n.market(s.key.market)
	if !ok || mi.binary != (s.key.out != 0) {
		return false
	}
	bids, asks, ok := depthOf(p, s.key, nil, nil)
	if !ok {
		return false
	}
	s.info, s.bids, s.asks, s.lastSeq, s.resolved, s.first = mi, bids, asks, p.LastSeq(), true, 0
	return true
}

// frame emits a touched stream's messages for the frame ending at seq.
func (h *Hub) frame(p *core.Processor, s *mstream, seq core.Seq) {
	sc := &h.lv
	var ok bool
	sc.bids, sc.asks, ok = depthOf(p, s.key, sc.bids[:0], sc.asks[:0])
	if !ok { // archived
		sc.bids, sc.asks = sc.bids[:0], sc.asks[:0]
	}
	sc.dbids = diffLevels(sc.dbids[:0], s.bids, sc.bids, true)
	sc.dasks = diffLevels(sc.dasks[:0], s.asks, sc.asks, false)
	bboChanged := topChanged(s.bids, sc.bids) || topChanged(s.asks, sc.asks)
	if len(sc.dbids)+len(sc.dasks) > 0 {
		if subs := s.subs[pubIdx(ChDepth)]; len(subs) > 0 {
			b := appendHead(sc.buf[:0], ChDepth, s.info.name, s.key.out)
			b = appendStrKV(b, "type", "diff")
			b = appendUintKV(b, "first_seq", uint64(s.first))
			b = appendUintKV(b, "last_seq", uint64(seq))
			b = appendUintKV(b, "prev_seq", uint64(s.lastSeq))
			b = appendKey(b, "bids")
			b = appendLevels(b, sc.dbids, &s.info)
			b = appendKey(b, "asks")
			b = appendLevels(b, sc.dasks, &s.info)
			b = append(b, '}')
			msg := append([]byte(nil), b...)
			sc.buf = b
			for c := range subs {
				c.send(msg)
			}
		}
		s.lastSeq = seq
		s.bids = append(s.bids[:0], sc.bids...)
		s.asks = append(s.asks[:0], sc.asks...)
	}
	if len(s.trades) > 0 {
		if subs := s.subs[pubIdx(ChTrades)]; len(subs) > 0 {
			b := appendHead(nil, ChTrades, s.info.name, s.key.out)
			b = appendUintKV(b, "last_seq", uint64(seq))
			b = append(b, `,"trades":[`...)
			b = append(b, s.trades...)
			b = append(b, "]}"...)
			for c := range subs {
				c.send(b)
			}
		}
		s.trades = s.trades[:0]
	}
	if (bboChanged || s.traded) && len(s.subs[pubIdx(ChTicker)]) > 0 {
		msg := s.ticker(nil, seq)
		for c := range s.subs[pubIdx(ChTicker)] {
			c.send(msg)
		}
	}
	s.first, s.traded = 0, false
}

func topChanged(a, b []core.PriceLevel) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) != len(b)
	}
	return a[0].Price != b[0].Price || a[0].Qty != b[0].Qty
}

// ticker is the stream's best bid/ask (at lastSeq) and last trade, as of seq.
func (s *mstream) ticker(b []byte, seq core.Seq) []byte {
	b = appendHead(b, ChTicker, s.info.name, s.key.out)
	b = appendUintKV(b, "seq", uint64(seq))
	for _, side := range [2]struct {
		k  string
		lv []core.PriceLevel
	}{{"best_bid", s.bids}, {"best_ask", s.asks}} {
		b = appendKey(b, side.k)
		if len(side.lv) == 0 {
			b = append(b, "null"...)
			continue
		}
		l := appendLevels(nil, side.lv[:1], &s.info)
		b = append(b, l[1:len(l)-1]...) // the one [price, qty] pair
	}
	if s.hasLast {
		b = appendUnitsKV(b, "last_price", int64(s.lastPx), s.info.priceScale)
		b = appendUnitsKV(b, "last_quantity", int64(s.lastQty), s.info.qtyScale)
	} else {
		b = append(b, `,"last_price":null,"last_quantity":null`...)
	}
	return append(b, '}')
}

// welcome answers a new public subscription: the ack, then the depth
// snapshot (at the stream's lastSeq: the book has not changed since) or
// the current ticker; trades start with the next frame.
func (h *Hub) welcome(s *mstream, w waiter) {
	if w.c.isDead() {
		return
	}
	w.c.sendAck("subscribed", w.id, w.ch, s.info.name, s.key.out)
	switch w.ch {
	case ChDepth:
		b := appendHead(nil, ChDepth, s.info.name, s.key.out)
		b = appendStrKV(b, "type", "snapshot")
		b = appendUintKV(b, "seq", uint64(s.lastSeq))
		b = appendKey(b, "bids")
		b = appendLevels(b, s.bids, &s.info)
		b = appendKey(b, "asks")
		b = appendLevels(b, s.asks, &s.info)
		w.c.send(append(b, '}'))
	case ChTicker:
		w.c.send(s.ticker(nil, core.Seq(h.flushed.Load())))
	}
	if s.subs[pubIdx(w.ch)] == nil {
		s.subs[pubIdx(w.ch)] = map[*conn]uint64{}
	}
	s.subs[pubIdx(w.ch)][w.c] = w.id
}

func (h *Hub) dropStream(s *mstream) {
	delete(h.streams, s.key)
	list := h.byMarket[s.key.market]
	for i, x := range list {
		if x == s {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(h.byMarket, s.key.market)
	} else {
		h.byMarket[s.key.market] = list
	}
}

// diffLevels appends to dst every level of nw that is new or whose
// quantity changed since old, and a level of quantity 0 for every price of
// old that nw no longer has. Both lists are sorted best first (desc: bids).
func diffLevels(dst, old, nw []core.PriceLevel, desc bool) []core.PriceLevel {
	before := func(a, b core.Price) bool {
		if desc {
			return a > b
		}
		return a < b
	}
	i, j := 0, 0
	for i < len(old) || j < len(nw) {
		switch {
		case j == len(nw) || (i < len(old) && before(old[i].Price, nw[j].Price)):
			dst = append(dst, core.PriceLevel{Price: old[i].Price})
			i++
		case i == len(old) || before(nw[j].Price, old[i].Price):
			dst = append(dst, nw[j])
			j++
		default:
			if old[i].Qty != nw[j].Qty {
				dst = append(dst, nw[j])
			}
			i++
			j++
		}
	}
	return dst
}

// activate starts the private subscriptions made since the last call, on
// the hub goroutine where the replica is at h.delivered: without since, a
// snapshot (balances, positions) and live messages after it; with since,
// a replay of since+1..delivered from the WAL, then live.
func (h *Hub) activate(n namer) {
	for _, ps := range h.pwait {
		if ps.gone.Load() || ps.c.isDead() {
			continue
		}
		d := h.delivered
		ps.active = true
		switch {
		case ps.hasSince && ps.since < d:
			ps.minSeq, ps.replaying = d, true
			ps.c.sendAck("subscribed", ps.id, ps.ch, "", 0)
			h.wg.Add(1)
			go h.replay(ps, ps.since+1, d)
		case ps.hasSince:
			ps.minSeq = ps.since
			ps.c.sendAck("subscribed", ps.id, ps.ch, "", 0)
		default:
			ps.minSeq = d
			ps.c.sendAck("subscribed", ps.id, ps.ch, "", 0)
			if msg := privSnapshot(ps, n, d); msg != nil {
				ps.c.send(msg)
			}
		}
	}
	h.pwait = h.pwait[:0]
}

// privSnapshot is the state a private channel starts from without since:
// every asset's balance, or every binary position (orders and transfers
// start empty: GET them once).
func privSnapshot(ps *privSub, n namer, seq core.Seq) []byte {
	switch ps.ch {
	case ChBalances:
		b := appendHead(nil, ChBalances, "", 0)
		b = appendStrKV(b, "type", "snapshot")
		b = appendUintKV(b, "seq", uint64(seq))
		b = append(b, `,"balances":[`...)
		for i, a := range n.reg.Assets() {
			bal := n.p.BalanceOf(ps.user, a.ID)
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"asset":"`...)
			b = append(b, a.Symbol...)
			b = append(b, '"')
			b = appendUnitsKV(b, "available", int64(bal.Avail), a.Scale)
			b = appendUnitsKV(b, "frozen", int64(bal.Frozen), a.Scale)
			b = append(b, '}')
		}
		return append(b, "]}"...)
	case ChPositions:
		b := appendHead(nil, ChPositions, "", 0)
		b = appendStrKV(b, "type", "snapshot")
		b = appendUintKV(b, "seq", uint64(seq))
		b = append(b, `,"positions":[`...)
		first := true
		for _, m := range n.p.Markets() {
			pv, ok := n.p.Position(ps.user, m.ID)
			if !ok || (pv.YesVolume == 0 && pv.NoVolume == 0) {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"market":"`...)
			b = strconv.AppendUint(b, uint64(m.ID), 10)
			b = append(b, '"')
			b = appendUintKV(b, "yes", uint64(pv.YesVolume))
			b = appendUintKV(b, "no", uint64(pv.NoVolume))
			b = append(b, '}')
		}
		return append(b, "]}"...)
	}
	return nil
}

// replay sends ps the private messages of from..to from the WAL (its own
// follower), then the live messages held meanwhile, and turns it live.
func (h *Hub) replay(ps *privSub, from, to core.Seq) {
	defer h.wg.Done()
	fail := func(code, msg string) {
		h.mu.Lock()
		h.unsubscribePriv(ps)
		h.mu.Unlock()
		ps.c.sendError(ps.id, code, msg)
	}
	select {
	case h.replays <- struct{}{}:
		defer func() { <-h.replays }()
	case <-ps.c.done:
		return
	}
	h.met.replays.Add(1)
	f, err := h.cfg.WAL.NewFollower(from)
	if err != nil {
		if errors.Is(err, journal.ErrHistoryGone) {
			fail(CodeResync, "too old: the WAL no longer holds seq "+strconv.FormatUint(uint64(from), 10)+"; resync (subscribe without since)")
			return
		}
		h.log.Warn("stream: replay failed", "from", from, "err", err)
		fail(CodeUnavailable, "replay failed; retry")
		return
	}
	var pb privBuilder
	want := func(u core.UserID, ch Channel) bool { return u == ps.user && ch == ps.ch }
	for f.NextSeq() <= to {
		recs, err := f.Next(h.ctx, int(min(followBatch, to-f.NextSeq()+1)))
		if err != nil {
			fail(CodeUnavailable, "replay failed; retry")
			return
		}
		n := namer{reg: h.cfg.Registry, p: f.Processor()}
		pb.msgs = pb.msgs[:0]
		for _, r := range recs {
			pb.build(r.Cmd, r.Events, want, n)
		}
		for i := range pb.msgs {
			if ps.gone.Load() || !ps.c.sendWait(pb.msgs[i].data, h.cfg.WriteTimeout) {
				return
			}
		}
		ps.replayed.Store(uint64(f.NextSeq() - 1))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ps.gone.Load() {
		return
	}
	for _, m := range ps.pending {
		ps.c.send(m)
	}
	ps.pending, ps.replaying = nil, false
}

// pongSeq is the seq of c's pong (under h.mu): every message of seqs <= it
// is queued for c. That is flushed, except for a subscription with since
// that is not live yet (waiting to be activated, or replaying): its
// messages after replayed are still to come, from the replay (or as the
// live messages it holds), however far the live stream has gone.
func (h *Hub) pongSeq(c *conn) uint64 {
	seq := h.flushed.Load()
	for _, ps := range c.subs {
		if ps != nil && ps.hasSince && (!ps.active || ps.replaying) {
			seq = min(seq, ps.replayed.Load())
		}
	}
	return seq
}

func (h *Hub) unsubscribePriv(ps *privSub) {
	ps.gone.Store(true)
	ps.active = false
	list := h.users[ps.user]
	for i, x := range list {
		if x == ps {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(h.users, ps.user)
	} else {
		h.users[ps.user] = list
	}
	ps.c.forget(subKey{ch: ps.ch})
}
