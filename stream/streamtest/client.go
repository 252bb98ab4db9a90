// Package streamtest is a test client of the WebSocket streams (GET /ws,
// package stream): one socket read on its own goroutine, every message
// checked against stream/schema and kept in order, and the checks that
// rebuild what a client of the streams rebuilds (a depth book from its
// snapshot and diffs, a private log applied exactly once).
//
// It does not import package stream, so stream's own internal tests use it.
package streamtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/ubscore/ubscore/stream/schema"
)

// Path is where the streams are served (stream.Path).
const Path = "/ws"

// Options configures Dial.
type Options struct {
	Token string // sent as Authorization: Bearer (empty: none)
	// Stalled: never read, with a small receive buffer, so the server's
	// queue for the socket fills fast (a slow consumer).
	Stalled bool
}

// Client is one socket. Its messages are read (unless Stalled) on their
// own goroutine; a message that is not JSON or not as the schema says
// ends the reading with an error that every wait reports.
type Client struct {
	t      testing.TB
	c      *websocket.Conn
	mu     sync.Mutex
	msgs   []map[string]any
	err    error // how reading ended
	done   chan struct{}
	nextID uint64
}

// Dial connects to the streams at addr (host:port); the socket is closed
// when the test ends.
func Dial(t testing.TB, addr string, o Options) *Client {
	t.Helper()
	h := http.Header{}
	if o.Token != "" {
		h.Set("Authorization", "Bearer "+o.Token)
	}
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	if o.Stalled {
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
	c, resp, err := d.Dial("ws://"+addr+Path, h)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", Path, err, resp)
	}
	w := &Client{t: t, c: c, done: make(chan struct{})}
	t.Cleanup(func() { _ = c.Close() })
	if !o.Stalled {
		go w.read()
	}
	return w
}

func (w *Client) read() {
	defer close(w.done)
	for {
		_, data, err := w.c.ReadMessage()
		if err == nil {
			var m map[string]any
			if err = json.Unmarshal(data, &m); err != nil {
				err = fmt.Errorf("not JSON: %q", data)
			} else if err = schema.Check(data); err == nil { // every message as its document says
				w.mu.Lock()
				w.msgs = append(w.msgs, m)
				w.mu.Unlock()
				continue
			}
		}
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		return
	}
}

// Conn is the socket itself.
func (w *Client) Conn() *websocket.Conn { return w.c }

// All returns a copy of the messages so far, in order.
func (w *Client) All() []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]map[string]any(nil), w.msgs...)
}

// Err is how reading ended (nil: still reading).
func (w *Client) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Send writes v with a fresh "id" and returns the id.
func (w *Client) Send(v map[string]any) uint64 {
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

// WaitFor waits until a message satisfies ok and returns it; it fails the
// test if the socket ends or within passes first.
func (w *Client) WaitFor(what string, within time.Duration, ok func(map[string]any) bool) map[string]any {
	w.t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, m := range w.All() {
			if ok(m) {
				return m
			}
		}
		if err := w.Err(); err != nil {
			w.t.Fatalf("%s: connection ended: %v", what, err)
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: not within %v; last messages: %v", what, within, Tail(w.All(), 5))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Ask sends v and returns the answer carrying its id.
func (w *Client) Ask(v map[string]any) map[string]any {
	w.t.Helper()
	id := w.Send(v)
	return w.WaitFor(fmt.Sprint(v), 20*time.Second, IDIs(id))
}

// Subscribe sends a subscribe and fails unless it is answered "subscribed".
func (w *Client) Subscribe(v map[string]any) {
	w.t.Helper()
	v["op"] = "subscribe"
	if m := w.Ask(v); m["type"] != "subscribed" {
		w.t.Fatalf("subscribe %v: %v", v, m)
	}
}

// CaughtUp pings until the stream has handed out every seq <= seq (a
// pong carries the seq it has reached).
func (w *Client) CaughtUp(seq uint64) {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := w.Ask(map[string]any{"op": "ping"})
		if uint64(m["seq"].(float64)) >= seq {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("stream not caught up with seq %d: %v", seq, m)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CloseCode waits (up to within) for the socket to end and returns the
// close code the server sent (-1: it ended without one).
func (w *Client) CloseCode(within time.Duration) int {
	w.t.Helper()
	select {
	case <-w.done:
	case <-time.After(within):
		w.t.Fatal("socket still open")
	}
	var ce *websocket.CloseError
	if errors.As(w.Err(), &ce) {
		return ce.Code
	}
	return -1
}

// Done is closed when reading has ended.
func (w *Client) Done() <-chan struct{} { return w.done }

// Tail is the last n of ms.
func Tail(ms []map[string]any, n int) []map[string]any { return ms[max(0, len(ms)-n):] }

// IDIs matches the answer to the request with id.
func IDIs(id uint64) func(map[string]any) bool {
	return func(m map[string]any) bool { v, ok := m["id"].(float64); return ok && uint64(v) == id }
}
