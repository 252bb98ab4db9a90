package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ubscore/ubscore/core"
)

// p2pFinished makes n transfers from alice (11) to bob (12) with no hold
// and executes them: n finished transfers in the core.
func (h *harness) p2pFinished(n int) {
	h.t.Helper()
	for range n {
		evs, err := h.be.Submit(&core.Command{Kind: core.KindP2PTransfer, User: 11, OrderID: 12, Asset: 3, Amount: 1}, nil)
		if err != nil || evs[len(evs)-1].Code != core.OK {
			h.t.Fatalf("transfer: %v %v", err, evs)
		}
	}
	h.tick()
	h.tick() // a later command: a forget's cutoff is below the view's last command time
}

func (h *harness) p2pStats() core.P2PStats {
	h.t.Helper()
	var st core.P2PStats
	if err := h.be.Read(func(p *core.Processor, _ *History) error { st = p.P2PStats(); return nil }); err != nil {
		h.t.Fatal(err)
	}
	return st
}

// syncBuffer is a log destination the test reads while a goroutine writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestP2PForgetStepArchiveBehind: while the archive has not persisted the
// view's seq, a forget step submits nothing and says so
// (ErrP2PArchiveBehind, not a silent 0); once it has, the transfers go.
func TestP2PForgetStepArchiveBehind(t *testing.T) {
	h := newP2PHarness(t)
	h.p2pUsers()
	h.p2pFinished(3)
	if st := h.p2pStats(); st.Finished != 3 {
		t.Fatalf("finished %d, want 3", st.Finished)
	}
	ctx := context.Background()
	before := h.be.submits.Load()
	n, err := P2PForgetStep(ctx, h.be, math.MaxInt64, func() core.Seq { return 0 }, 20*time.Millisecond)
	if !errors.Is(err, ErrP2PArchiveBehind) || n != 0 {
		t.Fatalf("archive behind: forgot %d, err %v; want 0, ErrP2PArchiveBehind", n, err)
	}
	if h.be.submits.Load() != before || h.p2pStats().Finished != 3 {
		t.Fatal("a forget was submitted before the archive held the transfers")
	}
	// a stopping caller is not an error
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if n, err := P2PForgetStep(cctx, h.be, math.MaxInt64, func() core.Seq { return 0 }, time.Second); n != 0 || err != nil {
		t.Fatalf("cancelled: %d %v", n, err)
	}
	n, err = P2PForgetStep(ctx, h.be, math.MaxInt64, func() core.Seq { return math.MaxUint64 }, 20*time.Millisecond)
	if err != nil || n != 3 || h.p2pStats().Finished != 0 {
		t.Fatalf("archive caught up: forgot %d, err %v, finished left %d", n, err, h.p2pStats().Finished)
	}
}

// TestP2PRetentionMetricsAndLog: the retention's rounds put off by a
// lagging archive count in ubs_p2p_forget_deferred_total and log one WARN
// however many there are (rate-limited); once the archive catches up the
// transfers are forgotten and ubs_p2p_forgotten_total counts them (on the
// view); ubs_p2p_retained follows what the core holds.
func TestP2PRetentionMetricsAndLog(t *testing.T) {
	h := newP2PHarness(t)
	h.p2pUsers()
	h.p2pFinished(4)
	reg := prometheus.NewRegistry()
	read := func(fn func(*core.Processor)) bool {
		return h.be.Read(func(p *core.Processor, _ *History) error { fn(p); return nil }) == nil
	}
	pm := NewP2PMetrics(reg, read, []float64{0.001, 0.01})
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	h.be.mu.Lock()
	h.be.tap = pm.OnView(log, 2)
	h.be.mu.Unlock()
	if v := gatherValue(t, reg, "ubs_p2p_retained"); v != 4 {
		t.Fatalf("ubs_p2p_retained %v, want 4", v)
	}
	var caughtUp atomic.Bool
	persisted := func() core.Seq {
		if caughtUp.Load() {
			return math.MaxUint64
		}
		return 0
	}
	stop := StartP2PRetention(h.be, time.Nanosecond, persisted, func() {}, pm, log) // rounds every 100 ms, each waiting 100 ms
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(pm.forgetBehind) < 3 {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("deferred rounds %v, want >= 3", testutil.ToFloat64(pm.forgetBehind))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := strings.Count(logs.String(), "the archive lags"); got != 1 {
		stop()
		t.Fatalf("%d WARN lines for a lagging archive, want 1 (rate-limited):\n%s", got, logs.String())
	}
	if h.p2pStats().Finished != 4 || testutil.ToFloat64(pm.forgotten) != 0 {
		stop()
		t.Fatal("transfers forgotten before the archive held them")
	}
	caughtUp.Store(true)
	for testutil.ToFloat64(pm.forgotten) != 4 {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("forgotten %v, want 4", testutil.ToFloat64(pm.forgotten))
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if v := gatherValue(t, reg, "ubs_p2p_retained"); v != 0 || testutil.ToFloat64(pm.forgetErrs) != 0 {
		t.Fatalf("ubs_p2p_retained %v (want 0), errors %v", v, testutil.ToFloat64(pm.forgetErrs))
	}
}

// TestLogLimiter: one line per interval, the others counted and reported
// with the next line let through.
func TestLogLimiter(t *testing.T) {
	l := logLimiter{every: time.Minute}
	t0 := time.Unix(100, 0)
	if ok, d := l.allow(t0); !ok || d != 0 {
		t.Fatalf("first: %v %d", ok, d)
	}
	for i := range 5 {
		if ok, _ := l.allow(t0.Add(time.Duration(i+1) * time.Second)); ok {
			t.Fatal("a second line inside the interval")
		}
	}
	if ok, d := l.allow(t0.Add(time.Minute)); !ok || d != 5 {
		t.Fatalf("after the interval: %v %d, want true 5", ok, d)
	}
}

// gatherValue is the value of the unlabelled metric name on reg.
func gatherValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestRunRounds: the timers' shared loop runs a round every tick, again at
// once while the round answers true (a full batch), and stops with ctx.
func TestRunRounds(t *testing.T) {
	const every = 300 * time.Millisecond // the bounds below leave 150 ms for this machine's pauses
	ctx, cancel := context.WithCancel(context.Background())
	var calls []time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		runRounds(ctx, every, func() bool {
			calls = append(calls, time.Now())
			switch len(calls) {
			case 1, 2: // a backlog: the next two rounds come at once
				return true
			case 4:
				cancel()
			}
			return false
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("runRounds did not stop with its context")
	}
	if len(calls) != 4 {
		t.Fatalf("%d rounds, want 4", len(calls))
	}
	if d := calls[2].Sub(calls[0]); d >= every {
		t.Fatalf("the rounds after a full one waited %v (want at once, not a tick of %v)", d, every)
	}
	if d := calls[3].Sub(calls[2]); d < every/2 {
		t.Fatalf("a round after a partial one came after %v (want the next tick, %v)", d, every)
	}
}
