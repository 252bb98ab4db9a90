package logging

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Buffered is a log writer that batches lines: Write appends to a buffer
// under a mutex, and the buffer reaches the underlying writer at most
// FlushEvery later (a background goroutine), at once when it passes
// maxBuffered bytes, and at once after any record at WARN or above (the
// handler from NewBufferedHandler flushes it: warnings, errors and
// CRITICAL alerts are never held back, nor any line logged before them).
//
// Why: one write(2) per INFO line cost the exchange ~1 µs per line and a
// syscall on the request path (spec 003 §8.2 logs two INFO lines per
// transfer). The price: a SIGKILL loses at most the last FlushEvery of
// INFO lines; a graceful stop calls Close, which flushes.
type Buffered struct {
	w io.Writer

	// wmu serialises the writes to w (flushes, and writes after Close), so
	// lines reach w in order; mu guards the fields below and is never held
	// across a write to w, so loggers do not wait for the I/O of a flush.
	// Lock order: wmu, then mu.
	wmu     sync.Mutex
	mu      sync.Mutex
	buf     []byte // pending lines, bytes
	spare   []byte // the previous buffer, reused (swap on flush; nil while it is being written)
	err     error  // the first error writing to w (later writes still try)
	closed  bool
	kick    chan struct{} // cap 1: wakes the flusher early (the buffer is large)
	stop    chan struct{}
	stopped chan struct{}
}

// FlushEvery is the longest an INFO line waits in a Buffered writer.
const FlushEvery = 20 * time.Millisecond

// maxBuffered is the buffer size (bytes) past which a write wakes the flusher.
const maxBuffered = 64 << 10

// maxKept is the largest buffer kept for reuse after a flush. A loaded
// flusher runs well after its wake-up (the exchange logs ~10 MB/s of INFO
// lines under bench p2p, and the buffer passes 4*maxBuffered before the
// flush): a smaller bound re-grew the buffer, a copy per doubling, on
// every flush.
const maxKept = 16 * maxBuffered

// NewBuffered returns a Buffered writer on w and starts its flusher; Close
// stops it.
func NewBuffered(w io.Writer) *Buffered {
	b := &Buffered{w: w, kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go b.run()
	return b
}

// Write appends p (one or more whole lines) to the buffer; after Close it
// writes through.
func (b *Buffered) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.wmu.Lock() // after any flush in progress
		defer b.wmu.Unlock()
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	big := len(b.buf) >= maxBuffered
	b.mu.Unlock()
	if big {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// Flush writes the buffered lines to the underlying writer now.
func (b *Buffered) Flush() error { _, err := b.flush(false); return err }

// flush writes the buffered lines to w; with close it also marks b closed
// (later writes go straight through, after this one) and reports whether
// this call did (false: it already was). The buffer is swapped under mu and
// written under wmu only: loggers append to the other buffer meanwhile.
func (b *Buffered) flush(close bool) (closedNow bool, err error) {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.mu.Lock()
	if close {
		if b.closed {
			err := b.err
			b.mu.Unlock()
			return false, err
		}
		b.closed = true
	}
	out := b.buf
	if len(out) == 0 {
		err := b.err
		b.mu.Unlock()
		return close, err
	}
	b.buf, b.spare = b.spare[:0], nil
	b.mu.Unlock()
	_, werr := b.w.Write(out)
	b.mu.Lock()
	defer b.mu.Unlock()
	if werr != nil && b.err == nil {
		b.err = werr
	}
	if cap(out) <= maxKept { // else a burst: do not keep its memory
		b.spare = out[:0]
	}
	return close, b.err
}

// Close flushes, stops the flusher and makes later writes go straight through.
func (b *Buffered) Close() error {
	closed, err := b.flush(true)
	if !closed {
		return err
	}
	close(b.stop)
	<-b.stopped
	return err
}

func (b *Buffered) run() {
	defer close(b.stopped)
	t := time.NewTicker(FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.kick:
		}
		_ = b.Flush()
	}
}

// NewBufferedHandler is NewHandler on a Buffered writer: records at WARN
// and above flush the buffer before Handle returns. JSON lines are the
// bytes NewHandler writes, formatted by a faster path when it can (fastJSON).
func NewBufferedHandler(b *Buffered, text bool) slog.Handler {
	if text {
		return flushingHandler{Handler: NewHandler(b, true), b: b}
	}
	return flushingHandler{Handler: newFastJSON(b), b: b} // NewHandler's JSON bytes, cheaper (fastjson.go)
}

// flushingHandler flushes b after every record at slog.LevelWarn or above.
type flushingHandler struct {
	slog.Handler
	b *Buffered
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if ferr := h.b.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h flushingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithAttrs(as), b: h.b}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithGroup(name), b: h.b}
}
