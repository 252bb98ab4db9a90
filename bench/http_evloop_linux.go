//go:build linux

package bench

import (
	"bufio"
	"bytes"
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
			l.timers(nanotime()) // after the batch: its processing time has passed
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
		var (
			n uintptr
			e unix.Errno
		)
		if l.rawWait {
			n, _, e = unix.RawSyscall6(unix.SYS_EPOLL_PWAIT2, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])),
				uintptr(len(l.events)), uintptr(unsafe.Pointer(&ts)), 0, 0)
		} else {
			n, _, e = unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])),
				uintptr(len(l.events)), uintptr(unsafe.Pointer(&ts)), 0, 0)
		}
		// ENOSYS: a kernel before 5.11; EPERM: a seccomp filter (older
		// container profiles) that does not know the call. Both: fall
		// back to epoll_wait for good.
		if e != unix.ENOSYS && e != unix.EPERM {
			if e != 0 {
				return 0, e
			}
			return int(n), nil
		}
		l.pwait2 = false
	}
	n, err := unix.EpollWait(l.epfd, l.events[:], int((timeout+999_999)/1_000_000))
	if err != nil {
		return 0, err // n is -1 then (EINTR included)
	}
	return n, nil
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
