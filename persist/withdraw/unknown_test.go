package withdraw_test

// A withdrawal whose commit has an unknown outcome (the connection died
// around COMMIT) is settled before Create answers (migration 0039): the
// committed withdrawal, or ErrNotRecorded with nothing moved and the id
// fenced so the lost transaction can never commit — never a bare error after
// which a retry without cid could withdraw twice. No chain needed.

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/withdraw"
)

func unknownFixture(t *testing.T, fault withdraw.Fault) (*pgxpool.Pool, *withdraw.Service) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.NewDB(t))
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
	return pool, withdraw.New(withdraw.Config{Pool: pool, Submitter: sub, ParseAddress: evm.ParseAddress, Fault: fault,
		Assets: []withdraw.Asset{{Symbol: "ETH", ID: eth, Scale: 8, ChainDecimals: 18}}})
}

func count(t *testing.T, pool *pgxpool.Pool, q string) (n int64) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreateCommitAnswerLost(t *testing.T) {
	pool, svc := unknownFixture(t, withdraw.FaultCommitLost)
	w, dup, err := svc.Create(context.Background(), withdraw.Request{User: 1, Asset: "ETH", Amount: 10_000_000, Address: "0x00000000000000000000000000000000000000aa"})
	if err != nil || dup {
		t.Fatalf("committed withdrawal answered err=%v dup=%v; want the withdrawal", err, dup)
	}
	if w.State != withdraw.Pending || w.Amount != 10_000_000 {
		t.Fatalf("withdrawal %+v", w)
	}
	if got := count(t, pool, `SELECT available FROM balances_tb WHERE user_id = 1`); got != 90_000_000 {
		t.Fatalf("FUNDING %d, want debited once to 90000000", got)
	}
	if got := count(t, pool, `SELECT count(*) FROM withdrawal_claims WHERE fenced`); got != 0 {
		t.Fatalf("%d fenced claims for a committed withdrawal", got)
	}
}

func TestCreateCommitDiedNothingHappened(t *testing.T) {
	pool, svc := unknownFixture(t, withdraw.FaultCommitDied)
	_, _, err := svc.Create(context.Background(), withdraw.Request{User: 1, Asset: "ETH", Amount: 10_000_000, Address: "0x00000000000000000000000000000000000000aa"})
	if !errors.Is(err, withdraw.ErrNotRecorded) {
		t.Fatalf("err %v, want ErrNotRecorded", err)
	}
	if got := count(t, pool, `SELECT available FROM balances_tb WHERE user_id = 1`); got != 100_000_000 {
		t.Fatalf("FUNDING %d after a withdrawal that did not happen", got)
	}
	if got := count(t, pool, `SELECT count(*) FROM withdrawals`) + count(t, pool, `SELECT count(*) FROM managed_tx`); got != 0 {
		t.Fatalf("%d rows left by a withdrawal that did not happen", got)
	}
	// The id is fenced: the lost transaction's first write would conflict.
	if got := count(t, pool, `SELECT count(*) FROM withdrawal_claims WHERE fenced`); got != 1 {
		t.Fatalf("%d fenced claims, want 1", got)
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO withdrawal_claims SELECT withdrawal_id, false FROM withdrawal_claims`); err == nil {
		t.Fatal("a fenced id could still be claimed by its transaction")
	}
}
