package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// TestBatchedAccountStateMatchesAlone: AccountState through the Batcher's
// reader answers the same, exactly as expected, whether each call is read
// alone (one statement each) or many calls share one statement, for every
// kind of account: a row, a frozen
// and a disabled row, an account without that asset's row, no account at
// all; and the reader shares statements between concurrent calls.
func TestBatchedAccountStateMatchesAlone(t *testing.T) {
	h, b := newBatchedHarness(t, BatchOptions{})
	ctx := context.Background()
	h.deposit(7, usdt, 1000)
	h.deposit(8, usdt, 50)
	h.deposit(9, btc, 3) // an account without a USDT row
	if err := h.funding.SetStatus(ctx, 8, usdt, model.Frozen); err != nil {
		t.Fatal(err)
	}
	h.deposit(10, usdt, 5)
	if err := h.funding.SetStatus(ctx, 10, usdt, model.Disabled); err != nil {
		t.Fatal(err)
	}
	type key struct {
		user  UserID
		asset AssetID
	}
	keys := []key{{7, usdt}, {8, usdt}, {9, usdt}, {9, btc}, {10, usdt}, {11, usdt}, {7, btc}}
	want := map[key]model.AccountState{
		{7, usdt}:  {Exists: true, Status: model.Active, Available: 1000},
		{8, usdt}:  {Exists: true, Status: model.Frozen, Available: 50},
		{9, usdt}:  {Exists: true, Status: model.Active},
		{9, btc}:   {Exists: true, Status: model.Active, Available: 3},
		{10, usdt}: {Exists: true, Status: model.Disabled, Available: 5},
		{11, usdt}: {Status: model.Active},
		{7, btc}:   {Exists: true, Status: model.Active},
	}
	for _, k := range keys { // one at a time: each call is its own statement
		d, err := h.funding.AccountState(ctx, k.user, k.asset)
		if err != nil || d != want[k] {
			t.Fatalf("alone %v: %+v %v, want %+v", k, d, err, want[k])
		}
	}
	before := b.Stats().Reads.Load()
	const rounds = 20
	var wg sync.WaitGroup
	errs := make(chan error, rounds*len(keys))
	for range rounds {
		for _, k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := h.funding.AccountState(ctx, k.user, k.asset)
				if err != nil || got != want[k] {
					errs <- fmt.Errorf("batched %v: %+v %v, want %+v", k, got, err, want[k])
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Sharing: 140 calls issued at once queue behind the reader's one
	// connection, so fewer statements than calls answer them (one statement
	// per call would mean the reader does not batch at all).
	if n := b.Stats().Reads.Load() - before; n < 1 || n >= rounds*int64(len(keys)) {
		t.Fatalf("%d reader statements for %d calls: not shared", n, rounds*len(keys))
	}
	// A closed Batcher refuses, and says so.
	b.Close()
	if _, err := h.funding.AccountState(ctx, 7, usdt); !errors.Is(err, ErrBatcherClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
