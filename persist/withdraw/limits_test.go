package withdraw_test

// Withdrawal limits against real Postgres and anvil (issue 33 item 6): the
// daily amount and count (flag defaults, a user's own override), and the
// allowlist, refuse with nothing debited and no withdrawal stored; a
// refund gives the quota back; 20 concurrent requests cannot pass a limit
// together.

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/withdraw"
)

// service is a Service like setup's, changed by mod.
func (f *fx) service(mod func(*withdraw.Config)) *withdraw.Service {
	cfg := withdraw.Config{Pool: f.pool, Submitter: f.m.Submitters()[0], ParseAddress: evm.ParseAddress, Nudge: f.m.Nudge,
		Assets: []withdraw.Asset{{Symbol: "ETH", ID: eth, Scale: 8, ChainDecimals: 18, Min: 1000, Max: 1_000_000_000}}}
	mod(&cfg)
	return withdraw.New(cfg)
}

func (f *fx) withdrawals() int64 {
	var n int64
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM withdrawals`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// refused asserts that err is a refusal with code.
func refused(t *testing.T, err error, code withdraw.Code) {
	t.Helper()
	var we *withdraw.Error
	if !errors.As(err, &we) || we.Code != code {
		t.Fatalf("%v, want %s", err, code)
	}
}

func TestWithdrawalLimits(t *testing.T) {
	t.Parallel() // own database and anvil; waits on them more than it computes
	f := setup(t)
	ctx := context.Background()
	svc := f.service(func(c *withdraw.Config) {
		c.Limits = map[core.AssetID]withdraw.Limit{eth: {Amount: 30_000_000, Count: 2}}
	})
	to := string(anviltest.Addr(0xbeef))
	req := func(amount core.Units, addr string) withdraw.Request {
		return withdraw.Request{User: 1, Asset: "ETH", Amount: amount, Address: addr}
	}
	ok := func(r withdraw.Request) withdraw.Withdrawal {
		t.Helper()
		w, _, err := svc.Create(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	no := func(r withdraw.Request, code withdraw.Code) {
		t.Helper()
		funding, n := f.funding(), f.withdrawals()
		_, _, err := svc.Create(ctx, r)
		refused(t, err, code)
		if f.funding() != funding || f.withdrawals() != n {
			t.Fatalf("%s: funding %d -> %d, withdrawals %d -> %d: a refusal changed something", code, funding, f.funding(), n, f.withdrawals())
		}
	}

	// The defaults: 0.3 ETH and 2 withdrawals a day.
	no(req(30_000_001, to), withdraw.CodeWithdrawalLimit)
	ok(req(20_000_000, to))
	no(req(20_000_000, to), withdraw.CodeWithdrawalLimit) // 0.4 > 0.3
	ok(req(5_000_000, to))
	no(req(1000, to), withdraw.CodeWithdrawalLimit) // the third of the day
	views, _, err := svc.Limits(ctx, 1)
	if err != nil || len(views) != 1 || views[0].UsedAmount != 25_000_000 || views[0].UsedCount != 2 || views[0].Overridden {
		t.Fatalf("limits view: %+v %v", views, err)
	}

	// The user's own limit overrides the default (0: none); clearing it restores it.
	if err := svc.SetLimit(ctx, 1, "ETH", withdraw.Limit{}); err != nil {
		t.Fatal(err)
	}
	ok(req(1000, to))
	if err := svc.ClearLimit(ctx, 1, "ETH"); err != nil {
		t.Fatal(err)
	}
	no(req(1000, to), withdraw.CodeWithdrawalLimit)
	if err := svc.SetLimit(ctx, 1, "ETH", withdraw.Limit{Amount: 40_000_000, Count: 10}); err != nil {
		t.Fatal(err)
	}

	// The allowlist: once the user has one, other addresses are refused.
	other := string(anviltest.Addr(0xcafe))
	if _, err := svc.AllowAddress(ctx, 1, evm.Checksummed(anviltest.Addr(0xbeef))); err != nil {
		t.Fatal(err)
	}
	no(req(1000, other), withdraw.CodeAddressNotAllowed)
	ok(req(1000, to))
	if err := svc.DisallowAddress(ctx, 1, to); err != nil {
		t.Fatal(err)
	}
	ok(req(1000, other)) // the list is empty again: any address

	// A refund gives the quota back: a reverted withdrawal is cancelled and
	// refunded, and its amount and count can be withdrawn again the same day.
	if err := svc.SetLimit(ctx, 1, "ETH", withdraw.Limit{Amount: 30_000_000, Count: 6}); err != nil {
		t.Fatal(err)
	}
	reverter := anviltest.Addr(0xdead)
	if err := f.node.SetCode(reverter, "0x60006000fd"); err != nil {
		t.Fatal(err)
	}
	rv := ok(req(4_997_000, string(reverter))) // the day's usage is now 0.3 ETH and 6 withdrawals
	no(req(1000, to), withdraw.CodeWithdrawalLimit)
	f.settleUntil(rv.ID, withdraw.Cancelled)
	ok(req(4_997_000, to))
	no(req(1000, to), withdraw.CodeWithdrawalLimit)
	f.conserved()
}

func TestWithdrawalLimitsConcurrent(t *testing.T) {
	t.Parallel() // own database and anvil; waits on them more than it computes
	f := setup(t)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		limit withdraw.Limit
		want  int
	}{
		{"amount", withdraw.Limit{Amount: 7_000_000}, 7},
		{"count", withdraw.Limit{Count: 5}, 5},
	} {
		if _, err := f.pool.Exec(ctx, `DELETE FROM withdrawal_usage`); err != nil { // a new day
			t.Fatal(err)
		}
		svc := f.service(func(cfg *withdraw.Config) { cfg.Limits = map[core.AssetID]withdraw.Limit{eth: c.limit} })
		before := f.funding()
		var wg sync.WaitGroup
		var mu sync.Mutex
		okN, limited := 0, 0
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := svc.Create(ctx, withdraw.Request{User: 1, Asset: "ETH", Amount: 1_000_000, Address: string(anviltest.Addr(i + 1))})
				var we *withdraw.Error
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					okN++
				case errors.As(err, &we) && we.Code == withdraw.CodeWithdrawalLimit:
					limited++
				default:
					t.Errorf("%s: %v", c.name, err)
				}
			}()
		}
		wg.Wait()
		if okN != c.want || limited != 20-c.want || f.funding() != before-int64(c.want)*1_000_000 {
			t.Fatalf("%s limit: %d accepted, %d refused, funding %d -> %d; want %d accepted", c.name, okN, limited, before, f.funding(), c.want)
		}
	}
	f.conserved()
}
