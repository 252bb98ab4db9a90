package withdraw_test

// The hot wallet check against real Postgres and anvil (issue 33 item 3):
// an unknown balance and an empty wallet refuse new withdrawals with
// nothing debited and nothing stored (and the empty one raises the
// CRITICAL alert); a refill lets them through after the next refresh; what
// is pending counts, also once mined after the balance's block; concurrent
// requests cannot pass the check together.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/logging"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/withdraw"
)

// syncBuffer is a log sink the manager's goroutines may write too.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func ether(milli int64) *big.Int { return new(big.Int).Mul(big.NewInt(milli), big.NewInt(1e15)) }

func TestHotWalletBalance(t *testing.T) {
	t.Parallel() // own database and anvil; waits on them more than it computes
	f := setup(t)
	ctx := context.Background()
	wallet := f.m.Submitters()[0]
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	hot := withdraw.NewHotWallet(withdraw.HotWalletConfig{Pool: f.pool, Chain: f.node.Client, Address: wallet,
		Interval: time.Hour, Margin: ether(10), Registerer: reg, // refreshed by hand below: no timing in the test
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: logging.ReplaceAttr}))})
	svc := f.service(func(c *withdraw.Config) { c.HotWallet = hot })
	to := string(anviltest.Addr(0xbeef))
	tenth := withdraw.Request{User: 1, Asset: "ETH", Amount: 10_000_000, Address: to} // 0.1 ETH
	no := func(code withdraw.Code) {
		t.Helper()
		funding, n := f.funding(), f.withdrawals()
		_, _, err := svc.Create(ctx, tenth)
		refused(t, err, code)
		if f.funding() != funding || f.withdrawals() != n {
			t.Fatalf("%s: funding %d -> %d, withdrawals %d -> %d: a refusal changed something", code, funding, f.funding(), n, f.withdrawals())
		}
	}
	refresh := func(balance *big.Int) {
		t.Helper()
		if balance != nil {
			if err := f.node.SetBalance(wallet, balance); err != nil {
				t.Fatal(err)
			}
		}
		if err := hot.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}

	no(withdraw.CodeHotWalletUnknown) // never refreshed: fail closed

	refresh(new(big.Int)) // empty
	no(withdraw.CodeHotWalletShort)
	if !strings.Contains(logs.String(), "level=CRITICAL") || !strings.Contains(logs.String(), "HOT_WALLET_INSUFFICIENT") {
		t.Fatalf("no CRITICAL alert for the empty wallet:\n%s", logs.String())
	}

	// A refill of 0.215 ETH pays two withdrawals of 0.1, their gas and the
	// 0.01 margin; the third is refused although the first two may be mined
	// already: the balance was read before them.
	refresh(ether(215))
	if g := metric(t, reg, "ubs_chain_hot_wallet_balance"); g != 0.215e18 {
		t.Fatalf("balance gauge %v", g)
	}
	w1, _, err := svc.Create(ctx, tenth)
	if err != nil {
		t.Fatal(err)
	}
	w2, _, err := svc.Create(ctx, tenth)
	if err != nil {
		t.Fatal(err)
	}
	no(withdraw.CodeHotWalletShort)
	f.settleUntil(w1.ID, withdraw.Completed)
	f.settleUntil(w2.ID, withdraw.Completed)
	// Final now, mined after the balance's block: still pending for that
	// reading (they left the sum once final, and a third passed).
	no(withdraw.CodeHotWalletShort)
	refresh(nil) // about 0.015 ETH left: below 0.1 + margin
	no(withdraw.CodeHotWalletShort)
	refresh(ether(1000))
	w3, _, err := svc.Create(ctx, tenth)
	if err != nil {
		t.Fatal(err)
	}
	f.settleUntil(w3.ID, withdraw.Completed)
	if !strings.Contains(logs.String(), "can pay the pending withdrawals again") {
		t.Fatalf("no all-clear after the refill:\n%s", logs.String())
	}

	// Ten users at once against a wallet that pays three withdrawals of 0.1
	// (and their gas and the margin): three pass, whatever the interleaving
	// (the users' own rows do not serialize them: the wallet's lock does).
	funding := transfer.NewFunding(transfer.NewBatcher(f.pool, transfer.BatchOptions{}))
	for u := core.UserID(2); u <= 11; u++ {
		if _, err := funding.ExternalDeposit(ctx, fmt.Sprintf("dep-%d", u), u, eth, 10_000_000); err != nil {
			t.Fatal(err)
		}
	}
	refresh(ether(315))
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, short := 0, 0
	for u := core.UserID(2); u <= 11; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := svc.Create(ctx, withdraw.Request{User: u, Asset: "ETH", Amount: 10_000_000, Address: to})
			var we *withdraw.Error
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.As(err, &we) && we.Code == withdraw.CodeHotWalletShort:
				short++
			default:
				t.Errorf("user %d: %v", u, err)
			}
		}()
	}
	wg.Wait()
	if accepted != 3 || short != 7 {
		t.Fatalf("concurrent: %d accepted, %d refused; want 3 and 7", accepted, short)
	}
	f.conserved()
}

func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
