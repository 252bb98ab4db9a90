package pgtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a test database, so a test can take
// "Postgres" away and bring it back without touching the shared server:
// Down closes every connection (the clients see them die mid-statement, as
// in a crash or a network cut) and refuses new ones until Up. It listens on
// 127.0.0.1 with a free port and stops when the test ends.
type Proxy struct {
	ln     net.Listener
	target string // host:port of the real server
	url    string // the database URL through the proxy

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	fatal *fatalFault // armed by FatalAfter (fatal.go); nil: none
}

// NewProxy starts a proxy for dbURL (a postgres:// URL, e.g. from NewDB) and
// returns it; URL is dbURL through the proxy.
func NewProxy(t testing.TB, dbURL string) *Proxy {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	u.Host = ln.Addr().String()
	p.url = u.String()
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the database URL through the proxy.
func (p *Proxy) URL() string { return p.url }

// Down cuts every connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Up accepts connections again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Down()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipeServer(c, s)
	}
}

// pipe copies src to dst; when either side ends both are closed.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
