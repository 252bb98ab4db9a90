package chaintx_test

// Issue 41 defect 1: a tx whose first broadcast the node refused (an empty
// hot wallet: "insufficient funds") goes ALLOCATED -> STUCK without ever
// having been TRACKING; the hook's CANCEL is refused as well. Once the
// wallet is refilled, the resubmit scheduler's send (the original with NOOP,
// the CANCEL with CANCEL, after chaintx.AllocatedGrace) is mined, and the
// receipt checker must find it: the tx reaches CONFIRMED / FAILED_FINAL
// CANCELLED, appended to the feed once after its STUCK entry (spec 002
// §2.3.2, §3.6: every tx that may still be mined is tracked).

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
)

func TestStuckSinceFirstSendTrackedAfterRefill(t *testing.T) {
	for _, c := range []struct {
		act      chaintx.Action
		st       chaintx.State
		sub      string
		received int64 // wei at the recipient afterwards
	}{
		{chaintx.ActionNoop, chaintx.Confirmed, "", 7},
		{chaintx.ActionCancel, chaintx.FailedFinal, chaintx.SubCancelled, 0},
	} {
		t.Run(string(c.act), func(t *testing.T) {
			e := newEnv(t)
			key, sub := e.node.NewKey(t)
			if err := e.node.SetBalance(sub, new(big.Int)); err != nil { // the hot wallet cannot pay
				t.Fatal(err)
			}
			cfg := e.fast(key, "a", e.store)
			cfg.StuckAfter, cfg.ResubmitInterval = 400*time.Millisecond, 200*time.Millisecond
			hook := &recordingHook{act: c.act}
			cfg.Hook = hook
			m := e.start(cfg)
			to := anviltest.Addr(0x41)
			tx := e.create(m, transfer(sub, "empty-wallet", to, 7))
			stuck := e.waitState(tx.ID, chaintx.Stuck, 5*time.Second)
			if stuck.LastError == "" || stuck.Receipt != nil {
				t.Fatalf("stuck before any broadcast worked: %+v", stuck)
			}
			waitFor(t, 3*time.Second, "the hook's audit row", func() bool { // CANCEL: stored before its (refused) send
				rs, _ := e.store.Remediations(context.Background(), tx.ID)
				return len(rs) == 1
			})
			time.Sleep(200 * time.Millisecond) // the hook's own broadcast is refused too; the resend comes after the refill

			wei, _ := new(big.Int).SetString("1000000000000000000000", 10)
			if err := e.node.SetBalance(sub, wei); err != nil { // refilled: the next resend is mined (automine)
				t.Fatal(err)
			}
			var got chaintx.Tx
			waitFor(t, 12*time.Second, "the tx final after the refill", func() bool {
				e.mine(1) // finality 2
				got = e.get(tx.ID)
				return got.State.Final()
			})
			if got.State != c.st || got.SubState != c.sub {
				t.Fatalf("final: %s/%s, want %s/%s (%+v)", got.State, got.SubState, c.st, c.sub, got)
			}
			time.Sleep(300 * time.Millisecond) // tracker passes: nothing more is appended
			cs := e.completions()
			if len(cs) != 2 || cs[0].State != chaintx.Stuck || cs[1].State != c.st || cs[1].TxID != tx.ID {
				t.Fatalf("completions: %+v (want STUCK then %s, once)", cs, c.st)
			}
			if bal, err := e.node.Balance(to); err != nil || bal.Cmp(big.NewInt(c.received)) != 0 {
				t.Fatalf("recipient holds %v wei (%v), want %d", bal, err, c.received)
			}
			if n := e.onChainNonces(sub); len(n) != 1 || n[*tx.Nonce] != 1 {
				t.Fatalf("on chain per nonce: %v (want one tx in nonce %d)", n, *tx.Nonce)
			}
		})
	}
}
