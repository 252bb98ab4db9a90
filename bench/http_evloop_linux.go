//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"
)

// EngineEvloop, as wrk runs: each of Threads goroutines is locked to its
// OS thread and drives its share of the connections (client c belongs to
// loop c % Threads) through an epoll instance of its own over raw
// non-blocking sockets, which the Go netpoller never sees. A connection
// has at most one request in flight:
//
//	connect ──► [due] ──► EPOLLOUT ──► write request ──► read answer ──► [due] ──► EPOLLOUT ──► write ...
//	               ▲                   (EPOLLOUT again     (frameResponse)
//	               │                    on EAGAIN)
//	               └── error: count it, close, reconnect after retryDelay
//
// The clock starts when the write of a request begins and stops when the
// last byte of its answer has been read. In the closed loop the next
// request is written when epoll next reports the connection writable (as
// wrk, see queue); in the open loop when its slot is due, the loop
// sleeping in epoll_pwait2 until the earliest slot of its connections.

const (
	retryDelay   = time.Millisecond // before a reconnect after an error, so a dead target is not spun on
	maxLoopWait  = 10 * time.Millisecond
	readBufStart = 4 << 10
	maxEvents    = 256
)

// Connection states.
const (
	evClosed     = iota // no socket; reconnect at retry
	evConnecting        // non-blocking connect in progress (EPOLLOUT armed)
	evIdle              // connected, no request in flight; open loop: waiting for due
	evWriting           // the request in wbuf[woff:] is being written
	evReading           // the request is written; its answer is being read into rbuf
)

// evConn is one connection, owned by its loop's goroutine.
type evConn struct {
	c, i    int // the client (cfg.Request's c) and its next request's number
	idx     int // its index in its loop's conns (its epoll events' Fd)
	fd      int
	gen     uint32 // bumped at each new socket, so an event of an old one is ignored
	state   int
	pollOut bool  // EPOLLOUT is armed
	start   int64 // nanotime() when the write of the request in flight began
	due     int64 // open loop: nanotime() of the next send
	retry   int64 // evClosed: nanotime() of the reconnect
	wbuf    []byte
	woff    int
	rbuf    []byte // rbuf[:rlen] is what has been read of the answer
	rlen    int
	want    int // the answer's length once its headers are in (0 = not yet)
}

// evLoop is one event loop: an OS thread, an epoll instance, its connections.
type evLoop struct {
	r      *httpRun
	sa     unix.Sockaddr
	family int
	head   bool // HEAD requests: answers have no body
	epfd   int
	conns  []*evConn
	tally  httpTally
	req    *fasthttp.Request
	uri    fasthttp.URI // r.uri, parsed
	resp   *fasthttp.Response
	out    bytes.Buffer
	bw     *bufio.Writer
	events [maxEvents]unix.EpollEvent
	pwait2 bool // epoll_pwait2 works (Linux >= 5.11): ns timeouts; else ms ones, rounded up
	// rawWait: epoll_pwait2 without telling the Go scheduler, which then
	// counts the loop's P as running, not in a syscall. Else, with every
	// P in a blocking syscall, sysmon wakes every 20 µs to retake one
	// (measured: ~6k wake-ups/s and ~10% of a core on this 2-core box,
	// CPU that wrk does not spend). Only when GOMAXPROCS > Threads: the
	// loops then hold Threads Ps for good and the rest run everything
	// else (timers, GC, an in-process target), which the loops would
	// otherwise starve for up to maxLoopWait at a time.
	rawWait bool
	closing int           // connections in evClosed (they need the timer)
	answer  []byte        // the answer being recorded, for bodyFn
	bodyFn  func() []byte // l.body, bound once (no allocation per answer)
}

func startEvloop(r *httpRun) (func(), error) {
	cfg := r.cfg
	ta, err := net.ResolveTCPAddr("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	threads := cfg.Threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	threads = min(threads, cfg.Conns)
	loops := make([]*evLoop, threads)
	for t := range loops {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			for _, l := range loops[:t] {
				_ = unix.Close(l.epfd)
			}
			return nil, fmt.Errorf("bench: epoll_create1: %w", err)
		}
		sa, family := sockaddr(ta) // one per loop: a unix.Sockaddr holds the buffer Connect writes into
		l := &evLoop{r: r, sa: sa, family: family, head: cfg.Method == "HEAD", epfd: epfd, tally: newHTTPTally(),
			req: fasthttp.AcquireRequest(), resp: fasthttp.AcquireResponse(), pwait2: true,
			rawWait: runtime.GOMAXPROCS(0) > threads}
		l.bw = bufio.NewWriterSize(&l.out, 4<<10)
		if err := l.uri.Parse(nil, []byte(r.uri)); err != nil {
			return nil, err
		}
		for c := t; c < cfg.Conns; c += threads {
			l.conns = append(l.conns, &evConn{c: c, idx: len(l.conns), fd: -1, state: evClosed,
				due: r.t0 + int64(r.interval)*int64(c)/int64(cfg.Conns), rbuf: make([]byte, readBufStart)})
		}
		l.closing = len(l.conns)
		l.bodyFn = l.body
		loops[t] = l
	}
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run()
		}()
	}
	return wg.Wait, nil
}

// sockaddr is a's socket address and family.
func sockaddr(a *net.TCPAddr) (unix.Sockaddr, int) {
	if ip4 := a.IP.To4(); ip4 != nil {
		s := &unix.SockaddrInet4{Port: a.Port}
		copy(s.Addr[:], ip4)
		return s, unix.AF_INET
	}
	s := &unix.SockaddrInet6{Port: a.Port}
	copy(s.Addr[:], a.IP.To16())
	return s, unix.AF_INET6
}

func (l *evLoop) run() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer l.shutdown()
	now := nanotime()
	for _, c := range l.conns {
		l.connect(c, now)
	}
	for !l.r.stop.Load() {
		n, err := l.wait(l.timeout(now))
		now = nanotime()
		if err != nil && err != unix.EINTR {
			// The epoll instance itself failed: nothing this loop can go on with.
			l.tally.recordErr(l.r, fmt.Errorf("bench: epoll_wait: %w", err))
			return
		}
		for _, ev := range l.events[:n] {
			c := l.conns[ev.Fd]
			if uint32(ev.Pad) == c.gen && c.fd >= 0 {
				l.event(c, ev.Events, now)
			}
		}
		if l.r.interval > 0 || l.closing > 0 {
			l.timers(now)
		}
	}
}

// timeout is how long the loop may sleep: until the earliest due send or
// reconnect, at most maxLoopWait (it checks stop that often).
func (l *evLoop) timeout(now int64) int64 {
	d := int64(maxLoopWait)
	if l.r.interval == 0 && l.closing == 0 {
		return d
	}
	for _, c := range l.conns {
		switch {
		case c.state == evClosed:
			d = min(d, c.retry-now)
		case c.state == evIdle && l.r.interval > 0:
			d = min(d, c.due-now)
		}
	}
	return max(d, 0)
}

// timers does the reconnects and open-loop sends that are due.
func (l *evLoop) timers(now int64) {
	for _, c := range l.conns {
		switch {
		case c.state == evClosed && c.retry <= now:
			l.connect(c, now)
		case c.state == evIdle && l.r.interval > 0 && c.due <= now:
			l.send(c, now)
		}
	}
}

// wait is epoll_wait with a timeout in ns: epoll_pwait2 where the kernel
// has it, else epoll_wait with the timeout rounded up to whole ms (an
// open-loop send can then be up to 1 ms late, not early).
func (l *evLoop) wait(timeout int64) (int, error) {
	if l.pwait2 {
		ts := unix.NsecToTimespec(timeout)
		sc := unix.Syscall6
		if l.rawWait {
			sc = unix.RawSyscall6
		}
		n, _, e := sc(unix.SYS_EPOLL_PWAIT2, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])),
			uintptr(len(l.events)), uintptr(unsafe.Pointer(&ts)), 0, 0)
		if e != unix.ENOSYS {
			if e != 0 {
				return 0, e
			}
			return int(n), nil
		}
		l.pwait2 = false
	}
	return unix.EpollWait(l.epfd, l.events[:], int((timeout+999_999)/1_000_000))
}

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
		l.pollIn(c, now)
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

// shutdown closes every socket and the epoll instance and merges the tally.
func (l *evLoop) shutdown() {
	for _, c := range l.conns {
		l.closeConn(c)
	}
	_ = unix.Close(l.epfd)
	fasthttp.ReleaseRequest(l.req)
	fasthttp.ReleaseResponse(l.resp)
	l.r.merge(&l.tally)
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
