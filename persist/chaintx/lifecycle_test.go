package chaintx_test

// The life of a managed tx against real Postgres and anvil: CREATED ->
// ALLOCATED -> TRACKING (visible before the final state, spec §1.3 c) ->
// CONFIRMED at the finality depth, the completions feed, and idempotency by
// (submitter, request_id) that uses no nonce.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
)

func TestTrackingVisibleBeforeConfirmed(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	if err := e.node.Automine(false); err != nil {
		t.Fatal(err)
	}
	m := e.start(e.fast(key, "a", e.store))
	tx := e.create(m, transfer(sub, "r1", anviltest.Addr(1), 1000))
	if tx.State != chaintx.Allocated || tx.Nonce == nil || tx.Hash == "" || len(tx.Signed) != 1 {
		t.Fatalf("created: %+v", tx)
	}
	e.waitState(tx.ID, chaintx.Tracking, 5*time.Second)
	time.Sleep(300 * time.Millisecond) // tracker passes: nothing is mined, it must stay TRACKING
	if got := e.get(tx.ID); got.State != chaintx.Tracking || got.Receipt != nil {
		t.Fatalf("unmined tx: %+v", got)
	}
	if err := e.node.Mine(1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "receipt", func() bool { return e.get(tx.ID).Receipt != nil })
	time.Sleep(300 * time.Millisecond) // one block deep only; finality is 2
	if got := e.get(tx.ID); got.State != chaintx.Tracking {
		t.Fatalf("one block deep: %s, want TRACKING", got.State)
	}
	if err := e.node.Mine(1); err != nil {
		t.Fatal(err)
	}
	got := e.waitState(tx.ID, chaintx.Confirmed, 5*time.Second)
	if got.Receipt.TxHash != tx.Hash || got.ConfirmedAt == nil {
		t.Fatalf("confirmed: %+v", got)
	}
	cs := e.completions()
	if len(cs) != 1 || cs[0].Seq != 1 || cs[0].TxID != tx.ID || cs[0].State != chaintx.Confirmed || cs[0].RequestID != "r1" {
		t.Fatalf("completions: %+v", cs)
	}
	bal, err := e.node.Balance(anviltest.Addr(1))
	if err != nil || bal.Sign() <= 0 {
		t.Fatalf("recipient balance %v %v", bal, err)
	}
}

func TestIdempotentRequestUsesNoNonce(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	m := e.start(e.fast(key, "a", e.store))
	var wg sync.WaitGroup
	ids := make([]chaintx.TxID, 20)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = e.create(m, transfer(sub, "same", anviltest.Addr(2), 7)).ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("one request_id gave two txs: %v", ids)
		}
	}
	tx := e.create(m, transfer(sub, "other", anviltest.Addr(2), 7))
	if *tx.Nonce != 1 {
		t.Fatalf("the next request got nonce %d, want 1 (a conflict must use no nonce)", *tx.Nonce)
	}
	again, existing, err := m.Create(context.Background(), transfer(sub, "same", anviltest.Addr(2), 7))
	if err != nil || !existing || again.ID != ids[0] {
		t.Fatalf("repeat: %+v %v %v", again, existing, err)
	}
}
