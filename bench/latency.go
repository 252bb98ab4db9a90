package bench

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// Latency histogram bounds: 1 ns .. 60 s at 3 significant digits.
const (
	latencyMin     = 1
	latencyMax     = int64(60 * time.Second)
	latencySigFigs = 3
)

var clockBase = time.Now()

// nanotime is this package's monotonic clock in ns.
func nanotime() int64 { return int64(time.Since(clockBase)) }

// calClaims is how many single-command claims calibrate the clock offset.
const calClaims = 8

// ackLatency records submit->ack latency per command into an HDR histogram.
//
// journal.Slot.Enq is stamped with journal's own (unexported) monotonic
// clock, which differs from ours by a constant offset. It is measured on the
// first claims, made one command at a time before any producer starts:
// SubmitFunc calls Config.Now immediately before it stamps Enq and then calls
// fill, so each such claim brackets its Enq between cal[i].t1 (taken in Now)
// and cal[i].t2 (taken in fill). The tightest bracket wins; the offset is
// exact to within half its width (ClockSkew, typically a few µs).
//
// Ownership: cal[i] is written by the calibrating goroutine before claim i is
// published and read by OnAck after; everything else belongs to OnAck (which
// the pipeline never calls concurrently, in seq order) until it is closed.
type ackLatency struct {
	hist     *hdrhistogram.Histogram
	cal      [calClaims]struct{ t1, t2 int64 } // our clock around claim i's Enq (claim i = seq i+1)
	offset   int64                             // journal clock - our clock
	bestSpan int64                             // width of the bracket offset came from; 0 = none yet
	negative int64                             // acks that computed < 0 (clock error), recorded as 0
	target   core.Seq                          // close done when this seq is acked
	done     chan struct{}
	from     core.Seq // record latencies of seqs >= from only (warm-up excluded)
	base     core.Seq // the seq before the run's first (a state under the workload); claim i = seq base+i+1
}

func newAckLatency(target core.Seq) *ackLatency {
	return &ackLatency{hist: hdrhistogram.New(latencyMin, latencyMax, latencySigFigs),
		target: target, done: make(chan struct{})}
}

// onAck is journal.Config.OnAck: called once per command, in seq order, never concurrently.
func (l *ackLatency) onAck(s *journal.Slot) {
	now := nanotime()
	if i := int(s.Cmd.Seq-l.base) - 1; s.Cmd.Seq > l.base && i < calClaims && l.cal[i].t2 != 0 {
		if span := max(l.cal[i].t2-l.cal[i].t1, 1); l.bestSpan == 0 || span < l.bestSpan {
			l.offset, l.bestSpan = s.Enq-(l.cal[i].t1+l.cal[i].t2)/2, span
		}
	}
	d := now + l.offset - s.Enq
	if d < 0 {
		l.negative++
		d = 0
	}
	if s.Cmd.Seq >= l.from {
		_ = l.hist.RecordValue(min(d, latencyMax))
	}
	if s.Cmd.Seq == l.target {
		close(l.done)
	}
}

// quantileMicros returns the q-quantile (0..100) in µs.
func (l *ackLatency) quantileMicros(q float64) float64 {
	return float64(l.hist.ValueAtPercentile(q)) / 1e3
}

// newLatencyHist is a histogram of ns values in the package's bounds.
func newLatencyHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(latencyMin, latencyMax, latencySigFigs)
}
