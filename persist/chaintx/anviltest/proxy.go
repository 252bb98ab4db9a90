package anviltest

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// HangProxy is a TCP proxy (127.0.0.1 only) in front of a node that can
// hang: Hang holds every byte the clients send (connections stay open,
// nothing is answered), Recover forwards what it held and goes on, as a
// node that stops answering and later answers again. Closed at the test's
// end (every connection with it).
type HangProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	open   chan struct{} // closed while traffic flows
	conns  []net.Conn
}

// NewHangProxy proxies to targetURL's host.
func NewHangProxy(t testing.TB, targetURL string) *HangProxy {
	t.Helper()
	u, err := url.Parse(targetURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &HangProxy{ln: ln, target: u.Host, open: make(chan struct{})}
	close(p.open)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Recover()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

// URL is the node's URL through the proxy.
func (p *HangProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Hang holds all traffic from now on.
func (p *HangProxy) Hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

// Recover forwards what was held, and everything after.
func (p *HangProxy) Recover() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

func (p *HangProxy) gate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

func (p *HangProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pump(s, c)
		go p.pump(c, s)
	}
}

// pump copies src to dst, each chunk once traffic flows.
func (p *HangProxy) pump(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
