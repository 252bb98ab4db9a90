package stream

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
)

// Close codes the server sends (docs/streams.md).
const (
	CloseGoingAway = websocket.CloseGoingAway         // 1001: the server is shutting down
	CloseTooBig    = websocket.CloseMessageTooBig     // 1009: a client message over MaxMessageBytes
	CloseInternal  = websocket.CloseInternalServerErr // 1011: the stream restarted after a failure: resubscribe
	CloseSlow      = 4008                             // the socket's buffer filled (a slow consumer): reconnect, with since
)

// Timing of a socket.
const (
	pingEvery = 20 * time.Second // a WebSocket ping; a client that answers nothing for idleLimit is closed
	idleLimit = 60 * time.Second
	tick      = time.Second // token expiry is checked this often
	// sendBuffer is each socket's kernel send buffer (SO_SNDBUF).
	sendBuffer = 64 << 10
)

// Path is where Wrap serves the WebSocket.
const Path = "/ws"

// Wrap returns next with GET /ws served by the hub.
func (h *Hub) Wrap(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == Path {
			h.Handler(ctx)
			return
		}
		next(ctx)
	}
}

var upgrader = websocket.FastHTTPUpgrader{
	ReadBufferSize:  MaxMessageBytes,
	WriteBufferSize: 16 << 10,
	// Browsers from any origin may read the public streams; private ones
	// need a token, which a page on another origin does not have.
	CheckOrigin: func(*fasthttp.RequestCtx) bool { return true },
}

func httpError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"code":"` + code + `","message":"` + msg + `"}`)
}

// Handler upgrades GET /ws. A token may come with it (Authorization:
// Bearer, or ?token=) for the private channels.
//
// A socket is counted (and Close waits for it) only once it is upgraded,
// inside the upgrade's callback: fasthttp calls no callback when writing
// the 101 fails, so a socket counted before the upgrade could never be
// uncounted. The limit is checked before the upgrade (a 503 answer) and
// again at the count (a close frame, 1013, for the sockets that raced).
func (h *Hub) Handler(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() {
		httpError(ctx, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "GET /ws upgrades to a WebSocket")
		return
	}
	var cl *gateway.Claims
	hdr := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	if t := ctx.QueryArgs().Peek("token"); len(hdr) == 0 && len(t) > 0 {
		hdr = append([]byte("Bearer "), t...)
	}
	if len(hdr) > 0 {
		c, err := h.cfg.Auth.AuthenticateAt(hdr, h.cfg.Now())
		if err != nil {
			code, msg := authError(err)
			httpError(ctx, http.StatusUnauthorized, code, msg)
			return
		}
		cl = &c
	}
	if refused, code, msg := h.full(); refused {
		httpError(ctx, http.StatusServiceUnavailable, code, msg)
		return
	}
	err := upgrader.Upgrade(ctx, func(ws *websocket.Conn) {
		// Everything the writer touches is set before the socket is
		// counted: a Close in between kills (and so marks) it at once.
		nc := socketOf(ws.NetConn())
		c := &conn{h: h, ws: ws, nc: nc, raw: rawConn(nc), out: make(chan []byte, h.cfg.Buffer), done: make(chan struct{}),
			closing: make(chan struct{}), wrote: make(chan struct{}), lastPing: time.Now(),
			ctl: make(chan ctlFrame, 4), subs: map[subKey]*privSub{}}
		if cl != nil {
			c.claims = *cl
			c.expires.Store(cl.ExpiresAt.UnixNano())
		}
		h.mu.Lock()
		if refused, _, msg := h.fullLocked(); refused {
			h.mu.Unlock()
			code := websocket.CloseTryAgainLater
			if h.closed {
				code = CloseGoingAway
			}
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, msg), time.Now().Add(time.Second))
			return
		}
		h.conns[c] = struct{}{}
		h.wg.Add(1) // before Close can Wait: Close sets closed under h.mu first
		h.mu.Unlock()
		h.met.conns.Add(1)
		if testCounted != nil {
			testCounted()
		}
		c.run()
	})
	if err != nil { // answered by the upgrader (400)
		return
	}
}

// testCounted, if set (tests only), runs between a socket's count and its
// run: the window a Close may fall into.
var testCounted func()

// full says whether a new socket is refused, and how: the hub is closing,
// or MaxConns sockets are open.
func (h *Hub) full() (bool, string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fullLocked()
}

func (h *Hub) fullLocked() (bool, string, string) {
	switch {
	case h.closed:
		return true, CodeUnavailable, "shutting down"
	case len(h.conns) >= h.cfg.MaxConns:
		h.met.refused.Add(1)
		return true, CodeTooManyConns, "the server's WebSocket limit is reached; retry later"
	}
	return false, "", ""
}

// authError is the code and message of a refused token: TOKEN_EXPIRED for
// an expired one (the client should fetch a new token), UNAUTHORIZED with
// the authenticator's reason otherwise.
func authError(err error) (string, string) {
	if gateway.IsTokenExpired(err) {
		return CodeTokenExpired, "the token has expired"
	}
	var ae *gateway.APIError
	if errors.As(err, &ae) {
		return CodeUnauthorized, ae.Message
	}
	return CodeUnauthorized, "invalid token"
}

// subKey names one subscription of a socket (s is zero for private ones).
type subKey struct {
	ch Channel
	s  skey
}

// conn is one socket. Its reader runs on the upgrade's goroutine; the
// hub's writer (writer.go) writes it; the hub only ever enqueues (never
// blocks on it).
type conn struct {
	h   *Hub
	ws  *websocket.Conn // its reads, by run only (fasthttp reuses it after run returns)
	nc  net.Conn        // the socket under ws: written by the writer only
	raw syscall.RawConn // nc's fd for non-blocking writes (nil: none)
	// closing is closed by kill; the writer then sends the close frame
	// (killCode, killReason) and closes the socket.
	closing    chan struct{}
	ctl        chan ctlFrame
	killCode   int
	killReason string
	out        chan []byte
	done       chan struct{} // closed when the reader has ended
	wrote      chan struct{} // closed by the writer when it is done with the socket
	dead       atomic.Bool
	marked     atomic.Bool // in the writer's dirty list
	once       sync.Once
	claims     gateway.Claims // under h.mu (UserID 0: none)
	expires    atomic.Int64   // claims.ExpiresAt in unix ns (0: no token), read without h.mu
	subs       map[subKey]*privSub

	// Owned by the writer goroutine.
	pend      []byte    // framed bytes the socket has not taken yet
	blockedAt time.Time // when pend last made progress, while it is not empty
	lastPing  time.Time
	finished  bool
}

func (c *conn) isDead() bool { return c.dead.Load() }

// send queues msg, or closes a socket whose buffer is full (never blocks).
func (c *conn) send(msg []byte) {
	if c.dead.Load() {
		return
	}
	select {
	case c.out <- msg:
		c.h.met.messages.Add(1)
		c.h.w.mark(c)
	default:
		c.h.met.slow.Add(1)
		c.kill(CloseSlow, "slow consumer: buffer full")
	}
}

// sendWait queues msg, waiting up to d for room (the socket's own replay).
func (c *conn) sendWait(msg []byte, d time.Duration) bool {
	if c.dead.Load() {
		return false
	}
	select {
	case c.out <- msg:
		c.h.met.messages.Add(1)
		c.h.w.mark(c)
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case c.out <- msg:
		c.h.met.messages.Add(1)
		c.h.w.mark(c)
		return true
	case <-c.done:
		return false
	case <-t.C:
		c.h.met.slow.Add(1)
		c.kill(CloseSlow, "slow consumer: buffer full")
		return false
	}
}

// kill closes the socket with code (once); the reader then cleans up.
func (c *conn) kill(code int, reason string) {
	c.once.Do(func() {
		c.killCode, c.killReason = code, reason
		c.dead.Store(true)
		close(c.closing)
		c.h.w.mark(c)
	})
}

func (c *conn) sendError(id uint64, code, msg string) {
	b := append([]byte(nil), `{"type":"error"`...)
	if id != 0 {
		b = appendUintKV(b, "id", id)
	}
	b = appendStrKV(b, "code", code)
	b = appendKey(b, "message")
	b = gateway.AppendJSONString(b, msg)
	c.send(append(b, '}'))
}

func (c *conn) sendAck(typ string, id uint64, ch Channel, market string, out core.Outcome) {
	b := append([]byte(nil), `{"type":"`...)
	b = append(b, typ...)
	b = append(b, '"')
	if id != 0 {
		b = appendUintKV(b, "id", id)
	}
	b = appendStrKV(b, "channel", ch.String())
	if market != "" {
		b = appendStrKV(b, "market", market)
	}
	if out != 0 {
		b = appendStrKV(b, "outcome", out.String())
	}
	c.send(append(b, '}'))
}

// forget drops a subscription from the socket's own list (under h.mu).
func (c *conn) forget(k subKey) { delete(c.subs, k) }

func (c *conn) run() {
	h := c.h
	defer h.wg.Done()
	// The kernel's share of the per-socket buffer: bounded too, so a
	// stalled reader fills the queue (and is closed) within about
	// sendBuffer bytes, and 10,000 stalled sockets cannot pin 4 MB each.
	setSendBuffer(c.nc, sendBuffer)
	h.w.add(c)
	c.ws.SetReadLimit(MaxMessageBytes)
	_ = c.ws.SetReadDeadline(time.Now().Add(idleLimit))
	c.ws.SetPongHandler(func(string) error { return c.ws.SetReadDeadline(time.Now().Add(idleLimit)) })
	// The writer alone writes: the reader's answers go through ctl.
	c.ws.SetPingHandler(func(data string) error {
		select {
		case c.ctl <- ctlFrame{op: framePong, payload: []byte(data)}:
			h.w.mark(c)
		default: // a client pinging faster than it reads: skip the pong
		}
		return c.ws.SetReadDeadline(time.Now().Add(idleLimit))
	})
	c.ws.SetCloseHandler(func(code int, _ string) error {
		select {
		case c.ctl <- ctlFrame{op: frameClose, payload: websocket.FormatCloseMessage(code, "")}:
			h.w.mark(c)
		default:
		}
		return nil
	})
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			break
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(idleLimit))
		c.handle(data)
	}
	c.dead.Store(true)
	close(c.done)
	h.w.mark(c)
	<-c.wrote // the writer has closed the socket and writes it no more
	h.mu.Lock()
	delete(h.conns, c)
	for k, ps := range c.subs {
		if ps != nil {
			h.unsubscribePriv(ps)
			continue
		}
		h.unsubscribePub(c, k)
	}
	h.mu.Unlock()
	h.met.conns.Add(-1)
}

// socketOf is the connection under fasthttp's hijack wrapper: the wrapper
// ignores Close (unless the server keeps hijacked connections), which left
// a killed socket open, counted and subscribed until its client went away
// or its idle deadline passed; and only the socket itself has a send
// buffer to size and a descriptor to write without blocking.
func socketOf(nc net.Conn) net.Conn {
	if u, ok := nc.(interface{ UnsafeConn() net.Conn }); ok {
		return u.UnsafeConn()
	}
	return nc
}

// setSendBuffer sets nc's SO_SNDBUF.
func setSendBuffer(nc net.Conn, n int) {
	if w, ok := nc.(interface{ SetWriteBuffer(int) error }); ok {
		_ = w.SetWriteBuffer(n)
	}
}

// WebSocket frame opcodes the writer sends (RFC 6455 §5.2), FIN set.
const (
	frameText  = 0x81
	frameClose = 0x88
	framePing  = 0x89
	framePong  = 0x8a
)

// appendFrame appends one unmasked server frame (RFC 6455 §5.2).
func appendFrame(b []byte, op byte, payload []byte) []byte {
	b = append(b, op)
	switch n := len(payload); {
	case n < 126:
		b = append(b, byte(n))
	case n <= 0xffff:
		b = append(b, 126, byte(n>>8), byte(n))
	default:
		b = append(b, 127, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, payload...)
}

// maxWrite bounds the bytes of queued messages the writer frames for one
// write: it takes the messages waiting (a frame's depth, trades and
// ticker) and writes their frames with one system call.
const maxWrite = 64 << 10

// ctlFrame is a control frame the reader asks the writer to send.
type ctlFrame struct {
	op      byte
	payload []byte
}

// handle answers one client message.
func (c *conn) handle(data []byte) {
	h := c.h
	r, perr := DecodeRequest(data)
	if perr != nil {
		h.met.badRequests.Add(1)
		c.sendError(r.ID, perr.Code, perr.Message)
		return
	}
	switch r.Op {
	case OpPing:
		b := append([]byte(nil), `{"type":"pong"`...)
		if r.ID != 0 {
			b = appendUintKV(b, "id", r.ID)
		}
		h.mu.Lock() // after every message of seqs <= flushed was queued (and replayed: pongSeq)
		b = appendUintKV(b, "seq", h.pongSeq(c))
		c.send(append(b, '}'))
		h.mu.Unlock()
	case OpSubscribe:
		if e := h.subscribe(c, &r); e != nil {
			c.sendError(r.ID, e.Code, e.Message)
		}
	case OpUnsubscribe:
		if e := h.unsubscribe(c, &r); e != nil {
			c.sendError(r.ID, e.Code, e.Message)
		}
	}
}

func (h *Hub) keyOf(r *Request) (subKey, *Error) {
	if r.Channel.Private() {
		return subKey{ch: r.Channel}, nil
	}
	if r.Outcome != 0 {
		return subKey{ch: r.Channel, s: skey{market: r.Binary, out: r.Outcome}}, nil
	}
	m, ok := h.cfg.Registry.Market(r.Market)
	if !ok {
		return subKey{}, badReq(CodeInvalidMarket, "unknown market (a binary market needs its outcome)")
	}
	return subKey{ch: r.Channel, s: skey{market: m.ID}}, nil
}

func (h *Hub) subscribe(c *conn, r *Request) *Error {
	k, e := h.keyOf(r)
	if e != nil {
		return e
	}
	var cl gateway.Claims
	if r.Channel.Private() && r.Token != "" {
		var err error
		cl, err = h.cfg.Auth.AuthenticateAt([]byte("Bearer "+r.Token), h.cfg.Now())
		if err != nil {
			return badReq(authError(err))
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := c.subs[k]; dup {
		return badReq(CodeAlreadySubscribed, "already subscribed to this channel")
	}
	full := len(c.subs) >= h.cfg.MaxSubs
	tooMany := badReq(CodeTooManySubs, "at most "+strconv.Itoa(h.cfg.MaxSubs)+" subscriptions per socket")
	if !r.Channel.Private() {
		if full {
			return tooMany
		}
		s := h.streams[k.s]
		if s == nil {
			s = &mstream{key: k.s}
			h.streams[k.s] = s
			h.byMarket[k.s.market] = append(h.byMarket[k.s.market], s)
		}
		s.waiting = append(s.waiting, waiter{c: c, ch: r.Channel, id: r.ID})
		c.subs[k] = nil
		return nil
	}
	if cl.UserID != 0 {
		if c.claims.UserID != 0 && c.claims.UserID != cl.UserID {
			return badReq(CodeUnauthorized, "one user per socket: the token names another user")
		}
		if cl.ExpiresAt.After(c.claims.ExpiresAt) {
			c.claims = cl
			c.expires.Store(cl.ExpiresAt.UnixNano())
		}
	}
	if c.claims.UserID == 0 {
		return badReq(CodeUnauthorized, "a private channel needs a token (on connect or in the subscribe message)")
	}
	if !h.cfg.Now().Before(c.claims.ExpiresAt) {
		return badReq(CodeTokenExpired, "the token has expired")
	}
	if full {
		return tooMany
	}
	if r.Channel == ChFunding {
		return h.subscribeFunding(c, r)
	}
	ps := &privSub{c: c, user: core.UserID(c.claims.UserID), ch: r.Channel, id: r.ID, since: r.Since, hasSince: r.HasSince}
	ps.replayed.Store(uint64(r.Since))
	c.subs[k] = ps
	h.users[ps.user] = append(h.users[ps.user], ps)
	h.pwait = append(h.pwait, ps)
	return nil
}

func (h *Hub) unsubscribe(c *conn, r *Request) *Error {
	k, e := h.keyOf(r)
	if e != nil {
		return e
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ps, ok := c.subs[k]
	if !ok {
		return badReq(CodeNotSubscribed, "not subscribed to this channel")
	}
	if ps != nil {
		h.unsubscribePriv(ps)
	} else {
		h.unsubscribePub(c, k)
	}
	name := r.Market
	c.sendAck("unsubscribed", r.ID, r.Channel, name, r.Outcome)
	return nil
}

// unsubscribePub removes c's subscription k (under h.mu).
func (h *Hub) unsubscribePub(c *conn, k subKey) {
	delete(c.subs, k)
	s := h.streams[k.s]
	if s == nil {
		return
	}
	delete(s.subs[pubIdx(k.ch)], c)
	for i := 0; i < len(s.waiting); i++ {
		if w := s.waiting[i]; w.c == c && w.ch == k.ch {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			i--
		}
	}
	if s.empty() {
		h.dropStream(s)
	}
}

// expire closes c's private channels once its token has expired.
func (h *Hub) expire(c *conn) {
	if e := c.expires.Load(); e == 0 || h.cfg.Now().UnixNano() < e {
		return // no token, or not expired: no lock taken (every socket checks every second)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.claims.UserID == 0 || h.cfg.Now().Before(c.claims.ExpiresAt) {
		return
	}
	for k, ps := range c.subs {
		if ps == nil {
			continue
		}
		h.unsubscribePriv(ps)
		h.met.expired.Add(1)
		b := append([]byte(nil), `{"type":"closed"`...)
		b = appendStrKV(b, "channel", k.ch.String())
		b = appendStrKV(b, "code", CodeTokenExpired)
		b = appendStrKV(b, "message", "the token has expired: subscribe again with a fresh token (and since)")
		c.send(append(b, '}'))
	}
	c.claims = gateway.Claims{}
	c.expires.Store(0)
}

// Close closes every socket with 1001 (going away) and refuses new ones;
// it waits up to d for them (fasthttp's shutdown does not close hijacked
// connections).
func (h *Hub) Close(d time.Duration) {
	h.mu.Lock()
	h.closed = true
	for c := range h.conns {
		c.kill(CloseGoingAway, "server shutting down")
	}
	if h.fundingCh != nil {
		close(h.fundingCh)
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		h.log.Warn("stream: sockets still open after the shutdown budget", "budget", d)
	}
	h.stopOnce.Do(func() { close(h.w.stop) })
}
