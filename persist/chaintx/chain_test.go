package chaintx_test

// Finality and failure handling against anvil: a reorg shallower than the
// finality depth sends a tx back to TRACKING and it is confirmed once; a
// dropped tx is resubmitted with the same nonce and signed payload; mining
// stopped -> STUCK + hook; REPLACE and CANCEL leave one tx per nonce on
// chain; a reverted tx is FAILED_FINAL; PLACEHOLDER fills a nonce gap; the
// pile-up metrics move when mining stops (spec §1.3 d).

import (
	"context"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
)

func (e *env) mine(n int) {
	e.t.Helper()
	if err := e.node.Mine(n); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) automine(on bool) {
	e.t.Helper()
	if err := e.node.Automine(on); err != nil {
		e.t.Fatal(err)
	}
}

func TestReorgBackToTrackingThenConfirmedOnce(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	e.automine(false)
	cfg := e.fast(key, "a", e.store)
	cfg.Finality = 3
	m := e.start(cfg)
	tx := e.create(m, transfer(sub, "r", anviltest.Addr(10), 5))
	e.waitState(tx.ID, chaintx.Tracking, 5*time.Second)
	e.mine(1)
	var first chaintx.Receipt
	waitFor(t, 5*time.Second, "receipt", func() bool {
		got := e.get(tx.ID)
		if got.Receipt != nil {
			first = *got.Receipt
		}
		return got.Receipt != nil
	})
	if err := e.node.Reorg(1); err != nil { // depth 1 < finality 3
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "back to TRACKING after the reorg", func() bool {
		got := e.get(tx.ID)
		return got.State == chaintx.Tracking && got.SubState == chaintx.SubReorged && got.Receipt == nil
	})
	waitFor(t, 5*time.Second, "the same tx back in the pool", func() bool {
		n, err := e.node.Client.PendingNonce(context.Background(), sub)
		return err == nil && n == 1
	})
	e.mine(1)
	waitFor(t, 5*time.Second, "receipt again", func() bool { return e.get(tx.ID).Receipt != nil })
	e.mine(2)
	got := e.waitState(tx.ID, chaintx.Confirmed, 5*time.Second)
	if got.Receipt.BlockHash == first.BlockHash || got.Receipt.TxHash != tx.Hash || *got.Nonce != *tx.Nonce {
		t.Fatalf("confirmed %+v, first receipt %+v", got.Receipt, first)
	}
	if cs := e.completions(); len(cs) != 1 || cs[0].State != chaintx.Confirmed {
		t.Fatalf("completions: %+v (want one CONFIRMED)", cs)
	}
}

func TestDroppedTxResubmittedSameNonceAndPayload(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	e.automine(false)
	cfg := e.fast(key, "a", e.store)
	cfg.ResubmitInterval = 300 * time.Millisecond
	m := e.start(cfg)
	tx := e.create(m, transfer(sub, "d", anviltest.Addr(11), 6))
	e.waitState(tx.ID, chaintx.Tracking, 5*time.Second)
	if err := e.node.Drop(tx.Hash); err != nil {
		t.Fatal(err)
	}
	if n, err := e.node.Client.PendingNonce(context.Background(), sub); err != nil || n != 0 {
		t.Fatalf("after the drop the pool still has the tx: pending nonce %d %v", n, err)
	}
	attempts := e.get(tx.ID).SubmitAttempts
	waitFor(t, 5*time.Second, "resubmission", func() bool { return e.get(tx.ID).SubmitAttempts > attempts })
	e.mine(2)
	got := e.waitState(tx.ID, chaintx.Confirmed, 5*time.Second)
	if got.Receipt.TxHash != tx.Hash || len(got.Signed) != 1 {
		t.Fatalf("mined %s with %d signed txs; want the original %s only", got.Receipt.TxHash, len(got.Signed), tx.Hash)
	}
	if n, mined, err := e.node.TxNonceOnChain(tx.Hash); err != nil || !mined || n != *tx.Nonce {
		t.Fatalf("on chain: nonce %d mined %v %v", n, mined, err)
	}
}

type recordingHook struct {
	mu    sync.Mutex
	calls []chaintx.ResolutionContext
	act   chaintx.Action
}

func (h *recordingHook) Decide(_ context.Context, rc chaintx.ResolutionContext) chaintx.Decision {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, rc)
	return chaintx.Decision{Action: h.act, Reason: "test hook"}
}

func (h *recordingHook) n() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.calls) }

func TestMiningStoppedStuckHookThenConfirmedAppendedAgain(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	e.automine(false)
	cfg := e.fast(key, "a", e.store)
	cfg.StuckAfter = time.Second
	hook := &recordingHook{act: chaintx.ActionNoop}
	cfg.Hook = hook
	cfg.Metrics = chaintx.NewMetrics(prometheus.NewRegistry())
	m := e.start(cfg)
	tx := e.create(m, transfer(sub, "s", anviltest.Addr(12), 7))
	e.waitState(tx.ID, chaintx.Stuck, 5*time.Second)
	waitFor(t, 2*time.Second, "hook", func() bool { return hook.n() == 1 })
	if rc := hook.calls[0]; rc.TxID != tx.ID || rc.Nonce != *tx.Nonce || rc.State != chaintx.Stuck {
		t.Fatalf("hook saw %+v", rc)
	}
	if v := testutil.ToFloat64(cfg.Metrics.Stuck); v != 1 {
		t.Fatalf("ubs_chain_stuck_total %v", v)
	}
	var rs []chaintx.Remediation
	waitFor(t, 2*time.Second, "the hook's audit row", func() bool { // written after the hook answers
		rs, _ = e.store.Remediations(context.Background(), tx.ID)
		return len(rs) > 0
	})
	if len(rs) != 1 || rs[0].Action != chaintx.ActionNoop || rs[0].NodeID != "a" || rs[0].FencingToken == 0 {
		t.Fatalf("audit: %+v", rs)
	}
	e.mine(2)
	e.waitState(tx.ID, chaintx.Confirmed, 5*time.Second)
	cs := e.completions()
	if len(cs) != 2 || cs[0].State != chaintx.Stuck || cs[1].State != chaintx.Confirmed || cs[0].Seq != 1 || cs[1].Seq != 2 {
		t.Fatalf("completions: %+v (want STUCK then CONFIRMED, seq 1, 2)", cs)
	}
	if hook.n() != 1 {
		t.Fatalf("hook called %d times", hook.n())
	}
}

// onChainNonces counts the submitter's transactions per nonce over every canonical block.
func (e *env) onChainNonces(sub chaintx.Address) map[uint64]int {
	e.t.Helper()
	head, err := e.node.Client.Head(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[uint64]int{}
	for b := uint64(1); b <= head; b++ {
		hs, err := e.node.BlockTxs(b)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, h := range hs {
			from, nonce, err := e.node.Sender(h)
			if err != nil {
				e.t.Fatal(err)
			}
			if from == sub {
				out[nonce]++
			}
		}
	}
	return out
}

func TestReplaceAndCancelOneTxPerNonce(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	e.automine(false)
	m := e.start(e.fast(key, "a", e.store))
	ctx := context.Background()
	to := anviltest.Addr(13)
	before, _ := e.node.Balance(to)
	rep := e.create(m, transfer(sub, "replace-me", to, 1000))
	cxl := e.create(m, transfer(sub, "cancel-me", to, 2000))
	e.waitState(cxl.ID, chaintx.Tracking, 5*time.Second)
	if _, err := m.Remediate(ctx, rep.ID, chaintx.ActionReplace, "fee too low"); err != nil {
		t.Fatal(err)
	}
	r, err := m.Remediate(ctx, cxl.ID, chaintx.ActionCancel, "user cancelled")
	if err != nil || r.Action != chaintx.ActionCancel || len(r.Hashes) != 1 {
		t.Fatalf("cancel: %+v %v", r, err)
	}
	if r2, err := m.Remediate(ctx, cxl.ID, chaintx.ActionCancel, "again"); err != nil || r2.Hashes[0] != r.Hashes[0] {
		t.Fatalf("a repeated CANCEL must resend the same signed tx: %+v %v", r2, err)
	}
	e.mine(3)
	got := e.waitState(rep.ID, chaintx.Confirmed, 5*time.Second)
	if got.Receipt.Kind != chaintx.KindReplace || len(got.Signed) != 2 {
		t.Fatalf("replaced tx: receipt %+v, %d signed", got.Receipt, len(got.Signed))
	}
	c := e.waitState(cxl.ID, chaintx.FailedFinal, 5*time.Second)
	if c.SubState != chaintx.SubCancelled || c.Receipt.Kind != chaintx.KindCancel {
		t.Fatalf("cancelled tx: %s %+v", c.SubState, c.Receipt)
	}
	for n, k := range e.onChainNonces(sub) {
		if k != 1 {
			t.Fatalf("nonce %d is on chain %d times", n, k)
		}
	}
	if ns := e.onChainNonces(sub); len(ns) != 2 {
		t.Fatalf("on-chain nonces %v, want 2", ns)
	}
	after, _ := e.node.Balance(to)
	if d := new(big.Int).Sub(after, before); d.Int64() != 1000 {
		t.Fatalf("recipient got %v wei, want 1000 (the replaced payload once, the cancelled one never)", d)
	}
}

func TestRevertedTxFailedFinal(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	reverter := anviltest.Addr(14)
	if err := e.node.SetCode(reverter, "0x60006000fd"); err != nil { // PUSH1 0 PUSH1 0 REVERT
		t.Fatal(err)
	}
	m := e.start(e.fast(key, "a", e.store))
	n := transfer(sub, "rev", reverter, 1)
	n.Payload.GasLimit = 50000
	tx := e.create(m, n)
	waitFor(t, 5*time.Second, "receipt", func() bool { return e.get(tx.ID).Receipt != nil })
	e.mine(1)
	got := e.waitState(tx.ID, chaintx.FailedFinal, 5*time.Second)
	if got.SubState != chaintx.SubReverted || got.Receipt.Success {
		t.Fatalf("reverted: %+v", got)
	}
	if cs := e.completions(); len(cs) != 1 || cs[0].State != chaintx.FailedFinal || cs[0].SubState != chaintx.SubReverted {
		t.Fatalf("completions %+v", cs)
	}
}

func TestPlaceholderFillsNonceGap(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	m := e.start(e.fast(key, "a", e.store))
	first := e.create(m, transfer(sub, "p0", anviltest.Addr(15), 1))
	waitFor(t, 5*time.Second, "receipt", func() bool { return e.get(first.ID).Receipt != nil })
	e.mine(1)
	e.waitState(first.ID, chaintx.Confirmed, 5*time.Second)
	// Two nonces lost (e.g. allocated by a writer whose rows a restore dropped).
	if _, err := e.pool.Exec(context.Background(), `UPDATE submitter_nonce_cursor SET next_nonce = next_nonce + 2 WHERE submitter = $1`, string(sub)); err != nil {
		t.Fatal(err)
	}
	m.Close() // a fresh process of the same node (the lease is still its own): no nonce cache
	m = e.start(e.fast(key, "a", e.store))
	waitFor(t, 5*time.Second, "lease", func() bool { _, ok := m.Leader(sub); return ok })
	gapped := e.create(m, transfer(sub, "p3", anviltest.Addr(15), 2))
	if *gapped.Nonce != 3 {
		t.Fatalf("nonce %d, want 3", *gapped.Nonce)
	}
	time.Sleep(300 * time.Millisecond)
	if e.get(gapped.ID).Receipt != nil {
		t.Fatal("a tx behind a gap was mined")
	}
	if _, err := m.Remediate(context.Background(), gapped.ID, chaintx.ActionPlaceholder, "gap"); err != nil {
		t.Fatal(err)
	}
	e.mine(2)
	e.waitState(gapped.ID, chaintx.Confirmed, 10*time.Second)
	for _, n := range []uint64{1, 2} {
		p, err := e.store.GetByRequest(context.Background(), sub, "placeholder:"+itoa(n))
		if err != nil || *p.Nonce != n || p.Signed[0].Kind != chaintx.KindPlaceholder {
			t.Fatalf("placeholder %d: %+v %v", n, p, err)
		}
		e.waitState(p.ID, chaintx.Confirmed, 5*time.Second)
	}
}

func TestPileupMetricsMoveWhenMiningStops(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	e.automine(false)
	cfg := e.fast(key, "a", e.store)
	cfg.Metrics = chaintx.NewMetrics(prometheus.NewRegistry())
	cfg.ResubmitInterval = 300 * time.Millisecond
	m := e.start(cfg)
	for i := range 5 {
		e.create(m, transfer(sub, "pile"+itoa(uint64(i)), anviltest.Addr(16), 1))
	}
	pending := func() float64 { return testutil.ToFloat64(cfg.Metrics.Pending.WithLabelValues(string(sub))) }
	oldest := func() float64 { return testutil.ToFloat64(cfg.Metrics.PendingOldest.WithLabelValues(string(sub))) }
	resub := func() float64 {
		return testutil.ToFloat64(cfg.Metrics.Resubmit.WithLabelValues("known")) + testutil.ToFloat64(cfg.Metrics.Resubmit.WithLabelValues("ok"))
	}
	waitFor(t, 5*time.Second, "pending gauge at 5", func() bool { return pending() == 5 })
	a := oldest()
	waitFor(t, 5*time.Second, "oldest pending age growing", func() bool { return oldest() > a+0.3 })
	waitFor(t, 5*time.Second, "resubmissions counted", func() bool { return resub() >= 5 })
	e.mine(3)
	waitFor(t, 10*time.Second, "pile-up cleared", func() bool { return pending() == 0 && oldest() == 0 })
}
