package gateway

import (
	"net"
	"sync"
	"time"
)

// fasthttp moves a connection's read deadline twice and its write deadline
// once per request (idle, read and write timeouts). Each move re-arms a
// runtime timer through the netpoller: about 4% of the exchange's CPU under
// the http benchmark. A DeadlineListener makes those moves plain stores:
// its connections remember their deadlines, and one sweeper per listener
// enforces them every tick by setting a deadline in the past on the real
// connection, which fails its blocked or next Read/Write with a timeout
// exactly as the deadline itself would have. Deadlines therefore fire up to
// one tick late, never early.

// DefaultDeadlineTick is the sweeper period of NewDeadlineListener.
const DefaultDeadlineTick = 250 * time.Millisecond

// DeadlineListener wraps a net.Listener; see NewDeadlineListener.
type DeadlineListener struct {
	net.Listener
	tick time.Duration

	mu     sync.Mutex
	conns  map[*deadlineConn]struct{}
	closed bool // the sweeper ends once closed and no connection is left
}

// NewDeadlineListener returns ln whose accepted connections enforce their
// read and write deadlines within tick (DefaultDeadlineTick if <= 0) after
// they pass. The sweeper runs until the listener is closed and its last
// connection too (a graceful shutdown still cuts off slow clients).
func NewDeadlineListener(ln net.Listener, tick time.Duration) *DeadlineListener {
	if tick <= 0 {
		tick = DefaultDeadlineTick
	}
	l := &DeadlineListener{Listener: ln, tick: tick, conns: map[*deadlineConn]struct{}{}}
	go l.sweep()
	return l
}

// Accept returns the next connection, wrapped.
func (l *DeadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	dc := &deadlineConn{Conn: c, l: l}
	l.mu.Lock()
	if l.closed {
		// Close ran while the inner Accept was returning: the sweeper may
		// already have stopped, and nothing would enforce this
		// connection's deadlines (a silent client could hold a graceful
		// shutdown for its whole drain time). Refuse it, as a closed
		// listener does.
		l.mu.Unlock()
		_ = c.Close()
		return nil, net.ErrClosed
	}
	l.conns[dc] = struct{}{}
	l.mu.Unlock()
	return dc, nil
}

// Close closes the listener (accepted connections stay open, as with any
// listener, and keep their deadlines).
func (l *DeadlineListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return l.Listener.Close()
}

func (l *DeadlineListener) sweep() {
	t := time.NewTicker(l.tick)
	defer t.Stop()
	for now := range t.C {
		if !l.expire(now.UnixNano()) {
			return
		}
	}
}

// expire fails the I/O of every connection whose deadline is at or before
// now. It reports whether the sweeper is still needed.
func (l *DeadlineListener) expire(now int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.expire(now)
	}
	return !l.closed || len(l.conns) > 0
}

// past is a deadline that has always passed.
var past = time.Unix(1, 0)

type deadlineConn struct {
	net.Conn
	l *DeadlineListener

	mu     sync.Mutex
	rd, wd int64 // deadlines in unix ns; 0 = none
	rArmed bool  // the real read deadline is set (in the past)
	wArmed bool
}

// SetWriteBuffer sets the socket's send buffer (SO_SNDBUF) when the
// connection is a TCP one (the WebSocket fan-out bounds each socket's).
func (c *deadlineConn) SetWriteBuffer(n int) error {
	if w, ok := c.Conn.(interface{ SetWriteBuffer(int) error }); ok {
		return w.SetWriteBuffer(n)
	}
	return nil
}

func (c *deadlineConn) expire(now int64) {
	c.mu.Lock()
	if c.rd != 0 && c.rd <= now && !c.rArmed {
		_ = c.Conn.SetReadDeadline(past)
		c.rArmed = true
	}
	if c.wd != 0 && c.wd <= now && !c.wArmed {
		_ = c.Conn.SetWriteDeadline(past)
		c.wArmed = true
	}
	c.mu.Unlock()
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// SetReadDeadline records t; the sweeper enforces it. A deadline already in
// the past takes effect at once.
func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rd = unixNano(t)
	if c.rd != 0 && !t.After(time.Now()) {
		c.rArmed = true
		return c.Conn.SetReadDeadline(past)
	}
	if c.rArmed {
		c.rArmed = false
		return c.Conn.SetReadDeadline(time.Time{})
	}
	return nil
}

// SetWriteDeadline is SetReadDeadline for writes.
func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wd = unixNano(t)
	if c.wd != 0 && !t.After(time.Now()) {
		c.wArmed = true
		return c.Conn.SetWriteDeadline(past)
	}
	if c.wArmed {
		c.wArmed = false
		return c.Conn.SetWriteDeadline(time.Time{})
	}
	return nil
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *deadlineConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
