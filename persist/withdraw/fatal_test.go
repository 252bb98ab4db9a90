package withdraw_test

// Issue 41 defect 2: a Postgres FATAL (57P01: pg_terminate_backend, a fast
// shutdown) proves nothing about a withdrawal's transaction — it can come
// after its COMMIT committed — so Create must settle it (the fence of
// migration 0039), never answer ErrNotRecorded ("nothing happened, no
// funds moved; retry") on it. The proxy sends the FATAL right after the
// COMMIT committed, and, for the other side of the rule, right after the
// debit inside the transaction (it then rolls back: the fence proves
// nothing happened).

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/withdraw"
)

func proxiedFixture(t *testing.T) (*pgxpool.Pool, *withdraw.Service, *pgtest.Proxy) {
	t.Helper()
	proxy := pgtest.NewProxy(t, pgtest.NewDB(t))
	pool, err := pgxpool.New(context.Background(), proxy.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx := context.Background()
	if err := persist.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := transfer.NewFunding(transfer.NewBatcher(pool, transfer.BatchOptions{})).ExternalDeposit(ctx, "dep-1", 1, eth, 100_000_000); err != nil {
		t.Fatal(err)
	}
	sub, err := evm.ParseAddress("0x000000000000000000000000000000000000bEEF")
	if err != nil {
		t.Fatal(err)
	}
	return pool, withdraw.New(withdraw.Config{Pool: pool, Submitter: sub, ParseAddress: evm.ParseAddress, SettleWait: 5 * time.Second,
		Assets: []withdraw.Asset{{Symbol: "ETH", ID: eth, Scale: 8, ChainDecimals: 18}}}), proxy
}

func TestCreateFatalAfterCommitIsTheWithdrawal(t *testing.T) {
	pool, svc, proxy := proxiedFixture(t)
	for i, cid := range []string{"", "c-1"} {
		proxy.FatalAfter(func(tag string) bool { return tag == "COMMIT" })
		req := withdraw.Request{User: 1, Asset: "ETH", Amount: 10_000_000, Address: "0x00000000000000000000000000000000000000aa", CID: cid}
		w, dup, err := svc.Create(context.Background(), req)
		if !proxy.Fired() {
			t.Fatal("the FATAL was not injected")
		}
		n := count(t, pool, `SELECT count(*) FROM withdrawals`)
		if err != nil {
			t.Fatalf("cid %q: Create answered %q after its COMMIT committed; %d withdrawals exist", cid, err, n)
		}
		if dup || w.ID == 0 || w.State != withdraw.Pending || n != int64(i+1) {
			t.Fatalf("cid %q: answer %+v dup=%v with %d withdrawals", cid, w, dup, n)
		}
		if got, want := count(t, pool, `SELECT available FROM balances_tb WHERE user_id = 1`), int64(100_000_000-(i+1)*10_000_000); got != want {
			t.Fatalf("FUNDING %d, want %d (debited once per withdrawal)", got, want)
		}
		if cid != "" {
			w2, dup, err := svc.Create(context.Background(), req)
			if err != nil || !dup || w2.ID != w.ID {
				t.Fatalf("retry with cid %q: %+v dup=%v %v", cid, w2, dup, err)
			}
		}
	}
	if got := count(t, pool, `SELECT count(*) FROM withdrawal_claims WHERE fenced`); got != 0 {
		t.Fatalf("%d fenced claims for committed withdrawals", got)
	}
}

func TestCreateFatalBeforeCommitIsFenced(t *testing.T) {
	pool, svc, proxy := proxiedFixture(t)
	proxy.FatalAfter(func(tag string) bool { return strings.HasPrefix(tag, "UPDATE ") }) // the debit, inside the transaction
	_, _, err := svc.Create(context.Background(), withdraw.Request{User: 1, Asset: "ETH", Amount: 10_000_000,
		Address: "0x00000000000000000000000000000000000000aa"})
	if !proxy.Fired() {
		t.Fatal("the FATAL was not injected")
	}
	if !errors.Is(err, withdraw.ErrNotRecorded) {
		t.Fatalf("err %v, want ErrNotRecorded (fenced)", err)
	}
	if got := count(t, pool, `SELECT available FROM balances_tb WHERE user_id = 1`); got != 100_000_000 {
		t.Fatalf("FUNDING %d after a withdrawal that did not happen", got)
	}
	if got := count(t, pool, `SELECT count(*) FROM withdrawals`); got != 0 {
		t.Fatalf("%d withdrawals", got)
	}
	// Proven by the fence, not by the error: the id is claimed as fenced.
	if got := count(t, pool, `SELECT count(*) FROM withdrawal_claims WHERE fenced`); got != 1 {
		t.Fatalf("%d fenced claims, want 1", got)
	}
}

// TestCreateReadAfterCommitFails: the withdrawal committed, then reading it
// back fails (FATAL on the SELECT after the COMMIT). Create must not answer
// that bare error (the gateway's "internal failure; retry later", after
// which a client without a cid withdraws twice): it reads again and answers
// the withdrawal.
func TestCreateReadAfterCommitFails(t *testing.T) {
	pool, svc, proxy := proxiedFixture(t)
	var committed atomic.Bool
	proxy.FatalAfter(func(tag string) bool {
		if tag == "COMMIT" {
			committed.Store(true)
			return false
		}
		return committed.Load() && strings.HasPrefix(tag, "SELECT ")
	})
	w, dup, err := svc.Create(context.Background(), withdraw.Request{User: 1, Asset: "ETH", Amount: 10_000_000,
		Address: "0x00000000000000000000000000000000000000aa"})
	if !proxy.Fired() {
		t.Fatal("the FATAL was not injected")
	}
	if err != nil || dup || w.ID == 0 || w.State != withdraw.Pending {
		t.Fatalf("Create answered %+v dup=%v err=%v for a committed withdrawal", w, dup, err)
	}
	if got := count(t, pool, `SELECT available FROM balances_tb WHERE user_id = 1`); got != 90_000_000 {
		t.Fatalf("FUNDING %d, want debited once", got)
	}
}
