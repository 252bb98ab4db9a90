//go:build linux

package bench

// One evloop connection's life: connect, write a request, read and frame
// its answer, record it, and close or reconnect (see http_evloop_linux.go).

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// connect opens a new non-blocking socket for c and starts connecting it.
func (l *evLoop) connect(c *evConn, now int64) {
	fd, err := unix.Socket(l.family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		l.fail(c, fmt.Errorf("bench: socket: %w", err), now)
		return
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) // as wrk
	c.fd, c.gen, c.rlen, c.want = fd, c.gen+1, 0, 0
	if c.state == evClosed {
		l.closing--
	}
	c.state, c.pollOut = evConnecting, true
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT, Fd: int32(c.idx), Pad: int32(c.gen)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.fail(c, fmt.Errorf("bench: epoll_ctl: %w", err), now)
		return
	}
	if err := unix.Connect(fd, l.sa); err != nil && err != unix.EINPROGRESS {
		l.fail(c, fmt.Errorf("bench: connect: %w", err), now)
	}
	// Connected or not, the socket's EPOLLOUT says when (connected) or
	// why not (SO_ERROR).
}

// event handles what epoll reported for c.
func (l *evLoop) event(c *evConn, ev uint32, now int64) {
	switch c.state {
	case evConnecting:
		if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		if e, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || e != 0 {
			if err == nil {
				err = unix.Errno(e)
			}
			l.fail(c, fmt.Errorf("bench: connect: %w", err), now)
			return
		}
		if l.pollIn(c, now); c.fd < 0 { // epoll_ctl failed: fail closed the socket
			return
		}
		c.state = evIdle
		if l.r.interval == 0 || c.due <= now {
			l.queue(c, now)
		}
	case evWriting:
		if ev&unix.EPOLLOUT != 0 {
			l.flush(c, now)
		} else if ev&(unix.EPOLLIN|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			l.read(c, now)
		}
	case evIdle, evReading:
		if ev&(unix.EPOLLIN|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			l.read(c, now)
		}
		if c.state == evIdle && c.pollOut && ev&unix.EPOLLOUT != 0 {
			l.send(c, now)
		}
	}
}

// queue has c's next request written when epoll next reports c writable,
// as wrk does (it arms EPOLLOUT when an answer completes and writes in
// the next round): the answers of a batch are all read, and timed, before
// any new request is written, and the answers that arrive meanwhile are
// read in the same round as those writes, not after all of them. Writing
// at once, or after the whole batch (measured: corrected p50 10% above
// wrk's at 32 connections), times answers behind other requests' writes.
func (l *evLoop) queue(c *evConn, now int64) {
	c.pollOut = true
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT, Fd: int32(c.idx), Pad: int32(c.gen)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		l.fail(c, fmt.Errorf("bench: epoll_ctl: %w", err), now)
	}
}

// pollIn disarms EPOLLOUT on c.
func (l *evLoop) pollIn(c *evConn, now int64) {
	if !c.pollOut {
		return
	}
	c.pollOut = false
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(c.idx), Pad: int32(c.gen)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		l.fail(c, fmt.Errorf("bench: epoll_ctl: %w", err), now)
	}
}

// send builds c's next request and starts writing it. In the open loop it
// takes the due slot and schedules the next one, skipping the slots
// already missed (no burst to catch up).
func (l *evLoop) send(c *evConn, now int64) {
	if iv := int64(l.r.interval); iv > 0 {
		if c.due += iv; c.due < now {
			c.due = now
		}
	}
	req, cfg := l.req, &l.r.cfg
	req.Reset()
	req.Header.SetMethod(cfg.Method)
	req.SetURI(&l.uri) // parsed once, not per request
	cfg.Request(c.c, c.i, req)
	c.i++
	l.out.Reset()
	err := req.Write(l.bw)
	if err == nil {
		err = l.bw.Flush()
	}
	if err != nil {
		l.bw.Reset(&l.out)
		l.fail(c, fmt.Errorf("bench: building the request: %w", err), now)
		return
	}
	c.wbuf = append(c.wbuf[:0], l.out.Bytes()...)
	c.woff, c.state = 0, evWriting
	c.start = nanotime()
	l.flush(c, c.start)
}

// flush writes what is left of c's request; on EAGAIN it arms EPOLLOUT.
func (l *evLoop) flush(c *evConn, now int64) {
	for c.woff < len(c.wbuf) {
		n, err := rawWrite(c.fd, c.wbuf[c.woff:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if !c.pollOut {
				c.pollOut = true
				ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT, Fd: int32(c.idx), Pad: int32(c.gen)}
				if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
					l.fail(c, fmt.Errorf("bench: epoll_ctl: %w", err), now)
				}
			}
			return
		case err != nil:
			l.fail(c, fmt.Errorf("bench: write: %w", err), now)
			return
		}
		c.woff += n
	}
	l.pollIn(c, now)
	if c.state == evWriting {
		c.state = evReading
		if c.rlen > 0 { // the answer began while the request was being written
			l.frame(c, now)
		}
	}
}

var (
	errServerClosed = errors.New("bench: the server closed the connection")
	errUnsolicited  = errors.New("bench: the server sent bytes no request asked for")
)

// read reads what c's socket has (one read, as the poll is level-triggered).
func (l *evLoop) read(c *evConn, now int64) {
	if c.rlen == len(c.rbuf) {
		c.rbuf = append(c.rbuf, make([]byte, len(c.rbuf))...)
	}
	n, err := rawRead(c.fd, c.rbuf[c.rlen:])
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
		return
	case err != nil:
		l.fail(c, fmt.Errorf("bench: read: %w", err), now)
		return
	case n == 0:
		if c.state == evIdle {
			l.reconnect(c, now) // a keep-alive connection the server closed between requests: no request lost
		} else {
			l.fail(c, errServerClosed, now)
		}
		return
	}
	c.rlen += n
	switch c.state {
	case evIdle:
		l.fail(c, errUnsolicited, now)
	case evReading:
		l.frame(c, nanotime())
	}
}

// frame completes c's request if rbuf holds the whole answer.
func (l *evLoop) frame(c *evConn, end int64) {
	if c.want > c.rlen {
		return
	}
	f, err := frameResponse(c.rbuf[:c.rlen], l.head)
	if err != nil {
		l.fail(c, err, end)
		return
	}
	if f.n == 0 || f.n > c.rlen {
		if f.n > len(c.rbuf) {
			c.rbuf = append(c.rbuf[:c.rlen], make([]byte, f.n-c.rlen)...)
		}
		c.want = f.n
		return
	}
	if l.r.counting.Load() {
		l.answer = c.rbuf[:f.n]
		l.tally.record(l.r, f.status, end-c.start, l.bodyFn)
	}
	extra := c.rlen > f.n
	c.rlen, c.want, c.state = 0, 0, evIdle
	switch {
	case extra:
		l.fail(c, errUnsolicited, end)
	case f.close:
		l.reconnect(c, end)
	case l.r.interval == 0 || c.due <= end:
		l.queue(c, end)
	}
}

// body is the body of the framed answer l.answer, parsed by fasthttp (only
// for the first non-2xx answer of the run, so the hot path never pays for it).
func (l *evLoop) body() []byte {
	l.resp.Reset()
	l.resp.SkipBody = l.head
	if err := l.resp.Read(bufio.NewReader(bytes.NewReader(l.answer))); err != nil {
		return []byte("(unparsable: " + err.Error() + ")")
	}
	return l.resp.Body()
}

// fail counts c's request as a transport error (if counted), closes c and
// schedules its reconnect.
func (l *evLoop) fail(c *evConn, err error, now int64) {
	if l.r.counting.Load() {
		l.tally.recordErr(l.r, err)
	}
	l.closeConn(c)
	c.retry = now + int64(retryDelay)
}

// reconnect replaces c's socket at once (the server ended the connection
// cleanly: no error).
func (l *evLoop) reconnect(c *evConn, now int64) {
	l.closeConn(c)
	l.connect(c, now)
}

// closeConn closes c's socket, if any, and puts c in evClosed.
func (l *evLoop) closeConn(c *evConn) {
	if c.fd >= 0 {
		_ = unix.Close(c.fd) // also removes it from the epoll set
		c.fd = -1
	}
	if c.state != evClosed {
		c.state = evClosed
		l.closing++
	}
	c.rlen, c.want, c.woff = 0, 0, 0
}

// rawRead and rawWrite are read(2) and write(2) on a non-blocking socket
// without the Go scheduler's syscall bookkeeping (they never block), which
// is the generator's own CPU per request, taken from the target's share of
// the cores.
func rawRead(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawWrite(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
