package transfer

// These tests run the unchanged Coordinator over a batched Store and
// FUNDING adapter (fakespot.Spot as SPOT): many concurrent transfers all end
// terminal with exact balances and conservation; explicit failures at the
// source, at the target and in compensation, mixed into the same batches
// as successes, end FAILED / ROLLED_BACK with the right codes; and with two
// drivers racing on every transfer each state change is won exactly once.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

func TestBatchCoordinatorManyTransfers(t *testing.T) {
	for _, writers := range []int{1, 2} {
		t.Run(fmt.Sprintf("writers=%d", writers), func(t *testing.T) {
			h, b := newBatchedHarness(t, BatchOptions{Writers: writers})
			c := h.newCoordinator(func(cfg *Config) { cfg.MaxWait = 20 * time.Second })
			const users, perUser = 32, 6
			for u := UserID(1); u <= users; u++ {
				h.deposit(u, usdt, 1_000_000)
				h.spot.Credit(u, usdt, 1_000_000)
			}
			var wg sync.WaitGroup
			for u := UserID(1); u <= users; u++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perUser {
						from, to := "FUNDING", "SPOT"
						if (int(u)+i)%2 == 1 {
							from, to = to, from
						}
						r, err := c.Create(context.Background(), model.Caller{Authenticated: true, UserID: u},
							model.Request{From: from, To: to, Asset: "USDT", Amount: "0.1"})
						if err != nil || r.Transfer.State != Committed {
							t.Errorf("user %d transfer %d %s->%s: %s %v", u, i, from, to, r.Transfer.State, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			for u := UserID(1); u <= users; u++ {
				if f, s := h.fundingBalance(u, usdt), h.spot.Balance(u, usdt); f != 1_000_000 || s != 1_000_000 {
					t.Fatalf("user %d: funding %d spot %d, want 1000000 each (3 transfers each way)", u, f, s)
				}
			}
			h.conserved(usdt)
			st := c.Stats()
			if st.Committed.Load() != users*perUser || st.CASWon.Load() != 4*users*perUser || st.Unknown.Load() != 0 {
				t.Fatalf("committed %d, CAS won %d, unknown %d", st.Committed.Load(), st.CASWon.Load(), st.Unknown.Load())
			}
			bs := b.Stats()
			t.Logf("%d requests in %d batches, %d retried, %d failed",
				bs.Requests.Load(), bs.Batches.Load(), bs.Retries.Load(), bs.Failed.Load())
			if bs.Requests.Load() <= bs.Batches.Load() || bs.Failed.Load() != 0 {
				t.Fatal("no two requests ever shared a batch, or a batch failed")
			}
		})
	}
}

func TestBatchCoordinatorFailuresAndRaces(t *testing.T) {
	for _, writers := range []int{1, 2} {
		t.Run(fmt.Sprintf("writers=%d", writers), func(t *testing.T) {
			h, _ := newBatchedHarness(t, BatchOptions{Writers: writers})
			ctx := context.Background()
			type flow struct {
				name     string
				first    UserID // users first..first+3
				from, to model.AccountType
				setup    func(u UserID)
				want     State
				cas      int64      // CAS won per transfer, across drivers
				code     model.Code // in error_message
				funding  Units      // FUNDING balance after
				spot     Units      // SPOT balance after
				transfer []Transfer
			}
			flows := []*flow{
				{name: "ok F->S", first: 1, from: model.AccountFunding, to: model.AccountSpot, want: Committed, cas: 4,
					setup: func(u UserID) { h.deposit(u, usdt, 1000) }, funding: 900, spot: 100},
				{name: "ok S->F", first: 11, from: model.AccountSpot, to: model.AccountFunding, want: Committed, cas: 4,
					setup: func(u UserID) { h.deposit(u, usdt, 1000); h.spot.Credit(u, usdt, 1000) }, funding: 1100, spot: 900},
				{name: "insufficient", first: 21, from: model.AccountFunding, to: model.AccountSpot, want: Failed, cas: 2,
					code: model.CodeInsufficientBalance, setup: func(u UserID) { h.deposit(u, usdt, 50) }, funding: 50},
				{name: "frozen source", first: 31, from: model.AccountFunding, to: model.AccountSpot, want: Failed, cas: 2,
					code: model.CodeAccountFrozen, setup: func(u UserID) {
						h.deposit(u, usdt, 1000)
						if err := h.funding.SetStatus(ctx, u, usdt, model.Frozen); err != nil {
							t.Fatal(err)
						}
					}, funding: 1000},
				{name: "disabled SPOT target: FUNDING refund", first: 41, from: model.AccountFunding, to: model.AccountSpot,
					want: RolledBack, cas: 5, code: model.CodeAccountDisabled, setup: func(u UserID) {
						h.deposit(u, usdt, 1000)
						h.spot.SetStatus(u, model.Disabled)
					}, funding: 1000},
				{name: "disabled FUNDING target: SPOT refund", first: 51, from: model.AccountSpot, to: model.AccountFunding,
					want: RolledBack, cas: 5, code: model.CodeAccountDisabled, setup: func(u UserID) {
						h.deposit(u, usdt, 1000)
						h.spot.Credit(u, usdt, 1000)
						if err := h.funding.SetStatus(ctx, u, usdt, model.Disabled); err != nil {
							t.Fatal(err)
						}
					}, funding: 1000, spot: 1000},
			}
			for _, f := range flows {
				for u := f.first; u < f.first+4; u++ {
					f.setup(u)
					f.transfer = append(f.transfer, h.insertAt(u, f.from, f.to, usdt, 100, Init))
				}
			}
			drivers := []*Coordinator{h.newCoordinator(nil), h.newCoordinator(nil)}
			var wg sync.WaitGroup
			for _, f := range flows {
				for _, tr := range f.transfer {
					for _, c := range drivers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
							defer cancel()
							if got, err := c.Drive(dctx, tr.ReqID); err != nil || got.State != f.want {
								t.Errorf("%s: drive %s: %s %v, want %s", f.name, tr.ReqID, got.State, err, f.want)
							}
						}()
					}
				}
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			var want int64
			for _, f := range flows {
				want += f.cas * int64(len(f.transfer))
				for _, tr := range f.transfer {
					got := h.get(tr.ReqID)
					if f.code != "" && !strings.Contains(got.ErrorMessage, string(f.code)) {
						t.Fatalf("%s: error_message %q lacks %s", f.name, got.ErrorMessage, f.code)
					}
					if fb, sb := h.fundingBalance(tr.UserID, usdt), h.spot.Balance(tr.UserID, usdt); fb != f.funding || sb != f.spot {
						t.Fatalf("%s: user %d funding %d spot %d, want %d and %d", f.name, tr.UserID, fb, sb, f.funding, f.spot)
					}
				}
			}
			var won int64
			for _, c := range drivers {
				won += c.Stats().CASWon.Load()
			}
			if won != want {
				t.Fatalf("%d CAS won across the two drivers, want %d: every state change exactly once", won, want)
			}
			h.conserved(usdt)
		})
	}
}
