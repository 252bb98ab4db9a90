package main

// A TCP proxy for the venue soak's NATS outages: while down it cuts every
// connection through it and refuses new ones, as a NATS server that went
// away would.

import (
	"io"
	"net"
	"sync"
	"testing"
)

type svProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
}

// newSVProxy listens on a free 127.0.0.1 port and forwards to target.
func newSVProxy(t *testing.T, target string) *svProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &svProxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() {
		_ = l.Close()
		p.Down()
	})
	return p
}

func (p *svProxy) addr() string { return p.l.Addr().String() }

func (p *svProxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		go p.serve(c)
	}
}

func (p *svProxy) serve(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = c.Close()
		_ = u.Close()
		return
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(u, c)
	go cp(c, u)
	<-done
	_ = c.Close()
	_ = u.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

// Down cuts every connection and refuses new ones until Up.
func (p *svProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Up accepts connections again.
func (p *svProxy) Up() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}
