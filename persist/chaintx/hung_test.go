package chaintx_test

// Issue 33 item 2: every chain call has a deadline (Config.RPCTimeout,
// --chain-rpc-timeout). With the node behind a proxy that stops answering,
// no tracker pass and no writer answer waits past a few timeouts, STUCK is
// still detected and the oldest-pending gauge keeps moving; timeouts are
// counted as failures (ubs_chain_rpc_failures_total), never taken for an
// outcome; once the node answers again the tx is confirmed as usual.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
)

func TestHungNodeNoLoopFreezes(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	e.automine(false)
	proxy := anviltest.NewHangProxy(t, e.node.URL)
	ctx := context.Background()
	client, err := evm.Dial(ctx, proxy.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	cfg := e.fast(key, "a", e.store)
	cfg.Chain = client
	cfg.Metrics = chaintx.NewMetrics(prometheus.NewRegistry())
	cfg.RPCTimeout = 300 * time.Millisecond
	cfg.TrackInterval = time.Hour // the test drives the tracker
	cfg.FeeCacheTTL, cfg.ResubmitInterval, cfg.StuckAfter = 50*time.Millisecond, 100*time.Millisecond, 800*time.Millisecond
	m := e.start(cfg)
	tx := e.create(m, transfer(sub, "before-hang", anviltest.Addr(0x2), 5))
	e.waitSent(tx.ID, 5*time.Second)

	// pass runs one tracker pass; it must end within bound.
	const bound = 3 * time.Second // a few timeouts (and a loaded machine); a freeze is unbounded
	pass := func(what string) {
		t.Helper()
		done := make(chan struct{})
		go func() { m.TrackOnce(ctx); close(done) }()
		select {
		case <-done:
		case <-time.After(bound):
			t.Fatalf("%s: a tracker pass froze with the node hung (RPC timeout %s)", what, cfg.RPCTimeout)
		}
	}
	oldest := func() float64 { return testutil.ToFloat64(cfg.Metrics.PendingOldest.WithLabelValues(string(sub))) }

	proxy.Hang()
	pass("first pass")
	first := oldest()
	waitFor(t, 5*time.Second, "STUCK detected and the gauge moving while the node hangs", func() bool {
		pass("pass")
		return e.get(tx.ID).State == chaintx.Stuck && oldest() > first
	})
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	start := time.Now()
	_, _, err = m.Create(cctx, transfer(sub, "during-hang", anviltest.Addr(0x2), 6))
	cancel()
	if errors.Is(err, chaintx.ErrOutcomeUnknown) || time.Since(start) > bound {
		t.Fatalf("the writer froze with the node hung: %v after %v", err, time.Since(start))
	}
	if err != nil && !errors.Is(err, chaintx.ErrRPCTimeout) {
		t.Fatalf("create with the node hung: %v (want an answer, or ErrRPCTimeout)", err)
	}
	if n := testutil.ToFloat64(cfg.Metrics.RPCFailures.WithLabelValues("receipt", "timeout")) +
		testutil.ToFloat64(cfg.Metrics.RPCFailures.WithLabelValues("send", "timeout")); n == 0 {
		t.Fatal("no timeout counted in ubs_chain_rpc_failures_total")
	}
	if got := e.get(tx.ID); got.Receipt != nil || got.State.Final() {
		t.Fatalf("a timeout taken for an outcome: %+v", got)
	}

	proxy.Recover()
	waitFor(t, 10*time.Second, "confirmed after the node recovers", func() bool {
		e.mine(1)
		pass("after recovery")
		return e.get(tx.ID).State == chaintx.Confirmed
	})
}
