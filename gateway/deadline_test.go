package gateway

import (
	"bufio"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// pair returns the server side (accepted through a DeadlineListener with a
// 20 ms tick) and the client side of a loopback connection.
func deadlinePair(t *testing.T) (*DeadlineListener, net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dl := NewDeadlineListener(ln, 20*time.Millisecond)
	t.Cleanup(func() { dl.Close() })
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	sc, err := dl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return dl, sc, cc
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func TestDeadlineListenerRead(t *testing.T) {
	_, sc, cc := deadlinePair(t)
	buf := make([]byte, 16)

	// A deadline fires: not before it, at most a few ticks after.
	start := time.Now()
	_ = sc.SetReadDeadline(start.Add(100 * time.Millisecond))
	_, err := sc.Read(buf)
	if el := time.Since(start); !isTimeout(err) || el < 100*time.Millisecond || el > 2*time.Second {
		t.Fatalf("read: %v after %v, want a timeout after 100ms", err, el)
	}
	// A new deadline in the future clears the expired one.
	_ = sc.SetReadDeadline(time.Now().Add(time.Second))
	go func() { time.Sleep(30 * time.Millisecond); _, _ = cc.Write([]byte("hi")) }()
	if n, err := sc.Read(buf); err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("read after re-arming: %q %v", buf[:n], err)
	}
	// A deadline moved forward before it passes does not fire.
	_ = sc.SetReadDeadline(time.Now().Add(80 * time.Millisecond))
	time.Sleep(40 * time.Millisecond)
	_ = sc.SetReadDeadline(time.Now().Add(time.Second))
	go func() { time.Sleep(150 * time.Millisecond); _, _ = cc.Write([]byte("yo")) }()
	if n, err := sc.Read(buf); err != nil || string(buf[:n]) != "yo" {
		t.Fatalf("read with a moved deadline: %q %v", buf[:n], err)
	}
	// No deadline: never fires.
	_ = sc.SetReadDeadline(time.Time{})
	go func() { time.Sleep(100 * time.Millisecond); _, _ = cc.Write([]byte("ok")) }()
	if n, err := sc.Read(buf); err != nil || string(buf[:n]) != "ok" {
		t.Fatalf("read without a deadline: %q %v", buf[:n], err)
	}
	// A deadline in the past fails at once.
	_ = sc.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := sc.Read(buf); !isTimeout(err) {
		t.Fatalf("read past its deadline: %v", err)
	}
}

func TestDeadlineListenerWrite(t *testing.T) {
	_, sc, _ := deadlinePair(t) // the client never reads
	_ = sc.SetWriteDeadline(time.Now().Add(150 * time.Millisecond))
	chunk := make([]byte, 1<<20)
	start := time.Now()
	var err error
	for err == nil && time.Since(start) < 5*time.Second {
		_, err = sc.Write(chunk)
	}
	if !isTimeout(err) {
		t.Fatalf("write to a client that does not read: %v after %v, want a timeout", err, time.Since(start))
	}
}

func TestDeadlineListenerForgetsClosedConns(t *testing.T) {
	dl, sc, _ := deadlinePair(t)
	dl.mu.Lock()
	n := len(dl.conns)
	dl.mu.Unlock()
	_ = sc.Close()
	dl.mu.Lock()
	m := len(dl.conns)
	dl.mu.Unlock()
	if n != 1 || m != 0 {
		t.Fatalf("conns tracked: %d open, %d after Close", n, m)
	}
}

// TestDeadlineListenerEnforcesAfterClose: closing the listener (a graceful
// shutdown) leaves open connections with working deadlines; the sweeper
// ends when the last one closes.
func TestDeadlineListenerEnforcesAfterClose(t *testing.T) {
	dl, sc, _ := deadlinePair(t)
	_ = dl.Close()
	_ = sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := sc.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read after the listener closed: %v", err)
	}
	if !dl.expire(time.Now().UnixNano()) {
		t.Fatal("sweeper would stop with a connection open")
	}
	_ = sc.Close()
	if dl.expire(time.Now().UnixNano()) {
		t.Fatal("sweeper would go on with the listener and every connection closed")
	}
}

// TestDeadlineListenerCutsSlowClients: fasthttp over a DeadlineListener
// still cuts off a client that sends half a request and stops, and still
// serves keep-alive requests normally.
func TestDeadlineListenerCutsSlowClients(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("pong") },
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}
	dl := NewDeadlineListener(ln, 20*time.Millisecond)
	go func() { _ = srv.Serve(dl) }()
	defer srv.Shutdown()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; i < 3; i++ { // keep-alive requests, each well within the timeouts
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		var resp fasthttp.Response
		if err := resp.Read(br); err != nil || string(resp.Body()) != "pong" {
			t.Fatalf("request %d: %v %q", i, err, resp.Body())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Half a request, then silence: the server gives up within the read
	// timeout (plus ticks) and closes the connection.
	start := time.Now()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, err := br.ReadString(0)
	if el := time.Since(start); err == nil || el > 3*time.Second || el < 150*time.Millisecond {
		t.Fatalf("slow client: read %q, %v after %v; want the connection closed after ~200ms", rest, err, el)
	}
	if rest != "" && !strings.HasPrefix(rest, "HTTP/1.1 408") {
		t.Fatalf("slow client got %q", rest)
	}
}

// closingListener hands over one connection, but only after the
// DeadlineListener around it has been closed (the race between Accept
// returning and Close).
type closingListener struct {
	net.Listener
	conn net.Conn
	dl   *DeadlineListener
}

func (l *closingListener) Accept() (net.Conn, error) {
	_ = l.dl.Close()
	return l.conn, nil
}

// TestDeadlineListenerRefusesAcceptAfterClose: a connection accepted after
// Close is closed and refused, never handed out with no sweeper to enforce
// its deadlines.
func TestDeadlineListenerRefusesAcceptAfterClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sc, cc := net.Pipe()
	defer cc.Close()
	inner := &closingListener{Listener: ln, conn: sc}
	dl := NewDeadlineListener(inner, 20*time.Millisecond)
	inner.dl = dl
	if c, err := dl.Accept(); !errors.Is(err, net.ErrClosed) || c != nil {
		t.Fatalf("Accept after Close: %v, %v", c, err)
	}
	_ = cc.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := cc.Write([]byte("x")); err == nil || isTimeout(err) {
		t.Fatalf("the refused connection is still open: write gave %v", err)
	}
}
