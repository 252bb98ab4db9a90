package main

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress cadence: the bar redraws every barEvery, the log line every logEvery.
const (
	barEvery = 100 * time.Millisecond
	logEvery = time.Second
)

// progressEvery: the replay loop publishes every progressEvery-th seq (an
// atomic store is a locked instruction; once per command cost ~2% of replay).
const progressEvery = 256

// progress reports replay progress on stderr from its own goroutine. The
// replay loop only stores the last seq it applied (one atomic store every
// progressEvery commands).
type progress struct {
	seq  atomic.Uint64 // a recently replayed seq (lags by < progressEvery); written by the replay loop
	stop chan struct{}
	done chan struct{}
}

// startProgress starts the reporter: a progressbar on a terminal (total 0 =
// unknown: a spinner with a count), otherwise a log line every second.
func startProgress(e env, o *opts, total uint64) *progress {
	p := &progress{stop: make(chan struct{}), done: make(chan struct{})}
	if o.quiet {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		if e.tty {
			p.bar(e, total)
		} else {
			p.log(e)
		}
	}()
	return p
}

func (p *progress) bar(e env, total uint64) {
	max := int64(total)
	if max == 0 {
		max = -1
	}
	bar := progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(e.stderr),
		progressbar.OptionSetDescription("replay"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("cmds"),
		progressbar.OptionThrottle(barEvery),
		progressbar.OptionClearOnFinish(),
	)
	t := time.NewTicker(barEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			_ = bar.Finish()
			return
		case <-t.C:
			_ = bar.Set64(int64(p.seq.Load()))
		}
	}
}

func (p *progress) log(e env) {
	start, t := time.Now(), time.NewTicker(logEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			s := p.seq.Load()
			fmt.Fprintf(e.stderr, "replay: at seq %d after %v\n", s, now.Sub(start).Round(time.Millisecond))
		}
	}
}

// finish stops the reporter and waits until it has written its last output.
func (p *progress) finish() {
	select {
	case <-p.done:
	default:
		close(p.stop)
		<-p.done
	}
}
