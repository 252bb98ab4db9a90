package pgtest

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
)

// A fault of the Proxy: the server's session ends with FATAL 57P01
// ("terminating connection due to administrator command", what
// pg_terminate_backend and a fast shutdown send) right after a statement
// completed — for a COMMIT, after it committed. The client sees the FATAL
// instead of the ReadyForQuery that would have followed the statement's
// CommandComplete: the error of a statement whose work is durable (issue 41).

type fatalFault struct {
	match func(tag string) bool
	fired atomic.Bool
}

// FatalAfter arms a one-shot fault: the next CommandComplete, on any
// connection, whose command tag match accepts (e.g. "COMMIT", "INSERT 0 1")
// is forwarded, then the ReadyForQuery after it is replaced by an
// ErrorResponse FATAL 57P01 and that connection is closed. For a COMMIT or
// an autocommit statement the transaction is then committed and durable
// (ReadyForQuery follows the commit); for a statement inside a transaction
// block it is rolled back when the connection closes (a FATAL before
// COMMIT).
// Fired reports whether it has happened.
func (p *Proxy) FatalAfter(match func(tag string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fatal = &fatalFault{match: match}
}

// Fired reports whether the fault FatalAfter armed last has been injected.
func (p *Proxy) Fired() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fatal != nil && p.fatal.fired.Load()
}

func (p *Proxy) armed() *fatalFault {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fatal == nil || p.fatal.fired.Load() {
		return nil
	}
	return p.fatal
}

// FatalMessage is the ErrorResponse FatalAfter sends (SQLSTATE 57P01).
func FatalMessage() []byte {
	var body []byte
	for _, f := range [][2]string{{"S", "FATAL"}, {"V", "FATAL"}, {"C", "57P01"},
		{"M", "terminating connection due to administrator command"}} {
		body = append(append(append(body, f[0][0]), f[1]...), 0)
	}
	body = append(body, 0)
	msg := []byte{'E', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(msg[1:], uint32(4+len(body)))
	return append(msg, body...)
}

// pipeServer copies the server's messages (src) to the client (dst) one
// by one (every server message is a type byte and a length: with
// sslmode=disable there is no SSL answer byte), injecting an armed
// FatalAfter fault; when either side ends both are closed.
func (p *Proxy) pipeServer(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	r, w := bufio.NewReaderSize(src, 64<<10), bufio.NewWriterSize(dst, 64<<10)
	var hdr [5]byte
	var body []byte
	var pending *fatalFault // matched a CommandComplete: fire at the next ReadyForQuery
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			_ = w.Flush()
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[1:])) - 4
		if n < 0 {
			return
		}
		if cap(body) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		switch hdr[0] {
		case 'C':
			if f := p.armed(); f != nil && pending == nil && len(body) > 0 && f.match(string(body[:len(body)-1])) &&
				f.fired.CompareAndSwap(false, true) {
				pending = f
			}
		case 'Z':
			if pending != nil {
				_ = w.Flush()
				_, _ = dst.Write(FatalMessage())
				return
			}
		}
		if _, err := w.Write(hdr[:]); err != nil {
			return
		}
		if _, err := w.Write(body); err != nil {
			return
		}
		if !nextBuffered(r) { // about to wait for the server: hand over what it sent
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// nextBuffered reports whether r holds the whole of its next message.
func nextBuffered(r *bufio.Reader) bool {
	if r.Buffered() < 5 {
		return false
	}
	h, err := r.Peek(5)
	return err == nil && int(binary.BigEndian.Uint32(h[1:]))+1 <= r.Buffered()
}
