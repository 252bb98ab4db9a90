package stream

import (
	"net"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
)

// The writer: one goroutine writes every socket.
//
// A frame of the fan-out is one message for each of a thousand sockets.
// With a writer goroutine per socket, a frame made a thousand goroutines
// runnable at once, and the pipeline's own goroutines (the journaler, the
// processor) waited in the scheduler's run queues behind them: the
// acknowledgements' tail latency grew with the number of subscribers.
// Here the hub's goroutines only queue messages (conn.send) and mark the
// socket dirty; the writer takes the dirty sockets in turn, frames what
// each has queued and writes it with one non-blocking system call. A
// socket whose kernel buffer is full keeps the rest (conn.pend) and is
// tried again at the next tick (writerTick); one that stays full for
// Config.WriteTimeout, or whose queue fills, is a slow consumer (4008).
// The writer also sends the pings (every pingEvery) and checks the tokens'
// expiry (every tick).
type writer struct {
	h    *Hub
	wake chan struct{} // capacity 1: a mark while the writer works is not lost
	stop chan struct{} // closed by Hub.Close once every socket is done

	mu    sync.Mutex
	dirty []*conn // sockets marked since the last pass, each once (conn.marked)
	added []*conn // sockets to take in (run, after the upgrade)

	// Owned by the writer goroutine.
	all     map[*conn]struct{} // every socket the writer has taken in and not finished
	blocked map[*conn]struct{} // sockets holding unwritten bytes (conn.pend)
	buf     []*conn
}

func newWriter(h *Hub) *writer {
	return &writer{h: h, wake: make(chan struct{}, 1), stop: make(chan struct{}),
		all: map[*conn]struct{}{}, blocked: map[*conn]struct{}{}}
}

// add takes c in (its reader is running) and marks it.
func (w *writer) add(c *conn) {
	w.mu.Lock()
	w.added = append(w.added, c)
	w.mu.Unlock()
	w.mark(c)
}

// mark has the writer look at c: it has something queued, a control frame,
// is closing or its reader has ended. It never blocks.
func (w *writer) mark(c *conn) {
	if !c.marked.CompareAndSwap(false, true) {
		return
	}
	w.mu.Lock()
	w.dirty = append(w.dirty, c)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run is the writer goroutine, until stop.
func (w *writer) run() {
	t := time.NewTicker(writerTick)
	defer t.Stop()
	lastTick, lastRetry := time.Now(), time.Now()
	for {
		select {
		case <-w.wake:
		case <-t.C:
		case <-w.stop:
			// Close waited for the sockets: any left (its budget ran out)
			// are closed now, so their readers end.
			w.mu.Lock()
			for _, c := range w.added {
				w.finish(c)
			}
			w.added = nil
			w.mu.Unlock()
			for c := range w.all {
				w.finish(c)
			}
			return
		}
		w.mu.Lock()
		for _, c := range w.added {
			if !c.finished { // finished before it was taken in (killed at once)
				w.all[c] = struct{}{}
			}
		}
		w.added = w.added[:0]
		w.buf, w.dirty = w.dirty, w.buf[:0]
		w.mu.Unlock()
		for _, c := range w.buf {
			c.marked.Store(false) // before the pass: a later mark is seen at the next one
			w.pass(c)
		}
		now := time.Now()
		if now.Sub(lastRetry) >= writerTick { // full sockets: retried on the tick, not on every wake-up
			lastRetry = now
			for c := range w.blocked {
				w.pass(c)
			}
		}
		if now.Sub(lastTick) >= tick {
			lastTick = now
			for c := range w.all {
				w.timers(c, now)
			}
		}
	}
}

// timers sends c's ping when due and closes its private channels when its
// token has expired.
func (w *writer) timers(c *conn, now time.Time) {
	if now.Sub(c.lastPing) >= pingEvery {
		c.lastPing = now
		c.pend = appendFrame(c.pend, framePing, nil)
		w.pass(c)
	}
	w.h.expire(c)
}

// pass writes what c has: its control frames, then its queued messages,
// as many as fit in maxWrite with what is still pending; or, when c is
// closing, its close frame, then the socket is closed.
func (w *writer) pass(c *conn) {
	if c.finished {
		return
	}
	select {
	case <-c.done:
		// The reader has ended: the control frames it queued (the answer
		// to a client's close, RFC 6455 §5.5.1) go out, best effort, and
		// nothing more.
		for len(c.ctl) > 0 {
			f := <-c.ctl
			c.pend = appendFrame(c.pend, f.op, f.payload)
		}
		if len(c.pend) > 0 {
			_, _ = c.write(c.pend)
		}
		w.finish(c)
		return
	default:
	}
	select {
	case <-c.closing:
		// Best effort (a stalled reader's socket may take nothing more):
		// the close frame, after what is pending if it fits now.
		c.pend = appendFrame(c.pend, frameClose, websocket.FormatCloseMessage(c.killCode, c.killReason))
		_, _ = c.write(c.pend)
		w.finish(c)
		return
	default:
	}
	for len(c.pend) < maxWrite {
		select {
		case f := <-c.ctl:
			c.pend = appendFrame(c.pend, f.op, f.payload)
			continue
		default:
		}
		select {
		case m := <-c.out:
			c.pend = appendFrame(c.pend, frameText, m)
			continue
		default:
		}
		break
	}
	if len(c.pend) == 0 {
		return
	}
	n, err := c.write(c.pend)
	c.pend = c.pend[:copy(c.pend, c.pend[n:])]
	switch {
	case err != nil:
		c.kill(CloseSlow, "write failed")
		w.finish(c)
	case len(c.pend) > 0 || len(c.out) > 0 || len(c.ctl) > 0:
		if _, ok := w.blocked[c]; !ok {
			c.blockedAt = time.Now()
			w.blocked[c] = struct{}{}
		} else if n > 0 {
			c.blockedAt = time.Now() // it moves: the timeout counts from the last progress
		}
		if len(c.pend) > 0 && time.Since(c.blockedAt) > w.h.cfg.WriteTimeout {
			if !c.dead.Load() {
				w.h.met.slow.Add(1)
			}
			c.kill(CloseSlow, "slow consumer: write timed out")
			w.finish(c)
		}
	default:
		delete(w.blocked, c)
		if cap(c.pend) > 2*maxWrite {
			c.pend = nil
		}
	}
}

// finish closes c's socket (its reader then ends) and lets run return.
func (w *writer) finish(c *conn) {
	if c.finished {
		return
	}
	c.finished = true
	delete(w.blocked, c)
	delete(w.all, c)
	c.dead.Store(true)
	_ = c.nc.Close() // the socket itself (socketOf): its reader then ends at once
	c.pend = nil
	close(c.wrote)
}

// deadlineWrite writes b with a short deadline, where no non-blocking
// write is at hand: it returns how much the socket took (a timeout is not
// an error).
func (c *conn) deadlineWrite(b []byte) (int, error) {
	_ = c.nc.SetWriteDeadline(time.Now().Add(time.Millisecond))
	n, err := c.nc.Write(b)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		err = nil
	}
	return n, err
}

// writerTick is how often the writer retries blocked sockets and checks
// the timers without a wake-up.
const writerTick = 20 * time.Millisecond
