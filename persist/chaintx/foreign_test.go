package chaintx_test

// Issue 33 item 1: a tx signed with the hot key outside the exchange is
// mined in the nonce of one of ours. Ours goes STUCK; CANCEL is refused
// (NONCE_TAKEN: it could never be mined); RESOLVE_FOREIGN is refused while
// the nonce is not --chain-finality deep, then makes the tx FAILED_FINAL
// (FOREIGN_NONCE) with one completion (the withdrawal's refund) and an
// audit row; repeated, it is refused. It is refused as well when the tx
// is not STUCK, and when the tx mined in the nonce is ours.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
)

func TestResolveForeignNonce(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	e.automine(false)
	cfg := e.fast(key, "a", e.store)
	cfg.Finality = 3
	cfg.StuckAfter, cfg.ResubmitInterval = 300*time.Millisecond, 200*time.Millisecond
	m := e.start(cfg)
	to, other := anviltest.Addr(0x331), anviltest.Addr(0x332)
	tx := e.create(m, transfer(sub, "wd-taken", to, 7))
	e.waitSent(tx.ID, 5*time.Second)

	if err := e.node.Drop(tx.Hash); err != nil { // out of the pool: the foreign tx takes the nonce
		t.Fatal(err)
	}
	foreign := e.node.SendForeign(t, key, *tx.Nonce, other, 9)
	e.mine(1)
	if n, mined, err := e.node.TxNonceOnChain(foreign); err != nil || !mined || n != *tx.Nonce {
		t.Fatalf("the foreign tx: nonce %d mined %v (%v)", n, mined, err)
	}
	e.waitState(tx.ID, chaintx.Stuck, 5*time.Second)
	ctx := context.Background()
	waitFor(t, 3*time.Second, "the hook's NOOP audit row", func() bool {
		rs, _ := e.store.Remediations(ctx, tx.ID)
		return len(rs) == 1
	})
	remediate := func(a chaintx.Action) error {
		_, err := m.Remediate(ctx, tx.ID, a, "admin 1: the hot key was used outside the exchange")
		return err
	}

	if err := remediate(chaintx.ActionCancel); !errors.Is(err, chaintx.ErrNonceTaken) {
		t.Fatalf("CANCEL in a taken nonce: %v, want ErrNonceTaken", err)
	}
	if err := remediate(chaintx.ActionResolveForeign); !errors.Is(err, chaintx.ErrNonceNotFinal) {
		t.Fatalf("RESOLVE_FOREIGN one block deep (finality 3): %v, want ErrNonceNotFinal", err)
	}
	if rs, _ := e.store.Remediations(ctx, tx.ID); len(rs) != 1 || rs[0].Action != chaintx.ActionNoop {
		t.Fatalf("audit after the refusals: %+v (want the hook's NOOP only)", rs)
	}
	e.mine(2)
	if err := remediate(chaintx.ActionResolveForeign); err != nil {
		t.Fatalf("RESOLVE_FOREIGN three blocks deep: %v", err)
	}
	got := e.get(tx.ID)
	if got.State != chaintx.FailedFinal || got.SubState != chaintx.SubForeign {
		t.Fatalf("resolved: %s/%s, want FAILED_FINAL/%s", got.State, got.SubState, chaintx.SubForeign)
	}
	if err := remediate(chaintx.ActionResolveForeign); !errors.Is(err, chaintx.ErrTxFinal) {
		t.Fatalf("RESOLVE_FOREIGN again: %v, want ErrTxFinal", err)
	}
	rs, err := e.store.Remediations(ctx, tx.ID)
	if err != nil || len(rs) != 2 || rs[1].Action != chaintx.ActionResolveForeign || rs[1].NodeID != "a" ||
		!strings.Contains(rs[1].Reason, "operator: admin 1: the hot key") || !strings.Contains(rs[1].Reason, string(tx.Hash)) {
		t.Fatalf("audit: %+v (%v)", rs, err)
	}
	e.mine(3)
	time.Sleep(300 * time.Millisecond) // tracker passes: nothing more is appended
	cs := e.completions()
	if len(cs) != 2 || cs[0].State != chaintx.Stuck || cs[1].State != chaintx.FailedFinal || cs[1].SubState != chaintx.SubForeign {
		t.Fatalf("completions: %+v (want STUCK, then FAILED_FINAL FOREIGN_NONCE once)", cs)
	}
	if bal, err := e.node.Balance(to); err != nil || bal.Sign() != 0 {
		t.Fatalf("our recipient holds %v (%v): want 0", bal, err)
	}
}

func TestResolveForeignRefusedWhenOursMined(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	e.automine(false)
	cfg := e.fast(key, "a", e.store)
	cfg.Finality = 3
	cfg.TrackInterval = time.Hour // the test drives the tracker
	cfg.StuckAfter = 200 * time.Millisecond
	m := e.start(cfg)
	tx := e.create(m, transfer(sub, "ours", anviltest.Addr(0x333), 7))
	e.waitState(tx.ID, chaintx.Tracking, 5*time.Second)
	ctx := context.Background()
	remediate := func() error {
		_, err := m.Remediate(ctx, tx.ID, chaintx.ActionResolveForeign, "admin 1: test")
		return err
	}
	if err := remediate(); !errors.Is(err, chaintx.ErrNotStuck) {
		t.Fatalf("RESOLVE_FOREIGN of a TRACKING tx: %v, want ErrNotStuck", err)
	}
	waitFor(t, 5*time.Second, "STUCK", func() bool { m.TrackOnce(ctx); return e.get(tx.ID).State == chaintx.Stuck })
	e.mine(3) // ours is mined, three blocks deep; no tracker pass has seen it yet
	if err := remediate(); !errors.Is(err, chaintx.ErrTxMined) {
		t.Fatalf("RESOLVE_FOREIGN with our own tx mined in the nonce: %v, want ErrTxMined", err)
	}
	waitFor(t, 5*time.Second, "CONFIRMED", func() bool { m.TrackOnce(ctx); return e.get(tx.ID).State == chaintx.Confirmed })
	if rs, _ := e.store.Remediations(ctx, tx.ID); len(rs) != 1 || rs[0].Action != chaintx.ActionNoop {
		t.Fatalf("audit: %+v (want the hook's NOOP only)", rs)
	}
}
