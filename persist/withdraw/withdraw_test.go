package withdraw_test

// Withdrawals against real Postgres and anvil: the debit and the CREATED
// managed tx commit together; CONFIRMED -> COMPLETED with the value on
// chain; reverted (FAILED_FINAL) and a confirmed CANCEL -> CANCELLED and
// refunded exactly once however often the settler runs; STUCK stays PENDING
// (never refunded automatically); refusals change nothing; the FUNDING +
// SPOT conservation check (with its withdrawn term) is exact throughout.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/chaintx/pgstore"
	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/invariant"
	"github.com/ubscore/ubscore/persist/withdraw"
)

const eth core.AssetID = 3

type noSpot struct{}

func (noSpot) SpotSnapshot(context.Context, []string) (invariant.SpotSnapshot, error) {
	return invariant.SpotSnapshot{}, nil
}

type fx struct {
	t     *testing.T
	pool  *pgxpool.Pool
	node  *anviltest.Node
	m     *chaintx.Manager
	store *pgstore.Store
	svc   *withdraw.Service
	log   *slog.Logger
}

func setup(t *testing.T) *fx {
	node := anviltest.StartT(t)
	url := pgtest.NewDB(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx := context.Background()
	if err := persist.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	chainID, err := node.Client.ChainID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := node.NewKey(t)
	signer, err := evm.NewSigner(key, chainID)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("UBS_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	store := pgstore.New(pool)
	m, err := chaintx.New(chaintx.Config{Store: store, Chain: node.Client, Signers: []chaintx.Signer{signer}, NodeID: "n1",
		Workers: 2, Finality: 2, TrackInterval: 100 * time.Millisecond, ReceiptInterval: 100 * time.Millisecond,
		ResubmitInterval: time.Second, StuckAfter: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(m.Close)
	svc := withdraw.New(withdraw.Config{Pool: pool, Submitter: signer.Address(), ParseAddress: evm.ParseAddress, Nudge: m.Nudge,
		Assets: []withdraw.Asset{{Symbol: "ETH", ID: eth, Scale: 8, ChainDecimals: 18, Min: 1000, Max: 1_000_000_000}}})
	f := &fx{t: t, pool: pool, node: node, m: m, store: store, svc: svc, log: log}
	if _, err := transfer.NewFunding(transfer.NewBatcher(pool, transfer.BatchOptions{})).ExternalDeposit(ctx, "dep-1", 1, eth, 100_000_000); err != nil { // 1 ETH
		t.Fatal(err)
	}
	f.conserved()
	return f
}

func (f *fx) funding() int64 {
	var v int64
	if err := f.pool.QueryRow(context.Background(), `SELECT available FROM balances_tb WHERE user_id = 1 AND asset_id = $1`, int32(eth)).Scan(&v); err != nil {
		f.t.Fatal(err)
	}
	return v
}

// conserved runs the conservation check: funding + spot + in flight + withdrawn == deposits + adjustments.
func (f *fx) conserved() {
	f.t.Helper()
	rep, err := invariant.CheckInvariant(context.Background(), f.pool, noSpot{}, []core.AssetID{eth})
	if err != nil {
		f.t.Fatal(err)
	}
	if !rep.OK {
		f.t.Fatalf("conservation violated: %+v", rep.Assets)
	}
}

func (f *fx) settleUntil(id int64, st withdraw.State) withdraw.Withdrawal {
	f.t.Helper()
	end := time.Now().Add(10 * time.Second)
	for {
		if _, err := f.svc.SettleOnce(context.Background(), f.store, f.log); err != nil {
			f.t.Fatal(err)
		}
		w, err := f.svc.Get(context.Background(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		if w.State == st {
			return w
		}
		if time.Now().After(end) {
			f.t.Fatalf("withdrawal %d: %s (tx %s), want %s", id, w.State, w.TxState, st)
		}
		_ = f.node.Mine(1)
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWithdrawals(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	to := anviltest.Addr(0xbeef)
	toChecksummed := evm.Checksummed(to)

	// Refusals change nothing.
	for _, c := range []struct {
		r    withdraw.Request
		code withdraw.Code
	}{
		{withdraw.Request{User: 1, Asset: "BTC", Amount: 5000, Address: toChecksummed}, withdraw.CodeInvalidAsset},
		{withdraw.Request{User: 1, Asset: "ETH", Amount: 5000, Address: "0x123"}, withdraw.CodeInvalidAddress},
		{withdraw.Request{User: 1, Asset: "ETH", Amount: 5000, Address: flipCase(toChecksummed)}, withdraw.CodeInvalidAddress},
		{withdraw.Request{User: 1, Asset: "ETH", Amount: 999, Address: toChecksummed}, withdraw.CodeAmountTooSmall},
		{withdraw.Request{User: 1, Asset: "ETH", Amount: 1_000_000_001, Address: toChecksummed}, withdraw.CodeAmountTooLarge},
		{withdraw.Request{User: 1, Asset: "ETH", Amount: 200_000_000, Address: toChecksummed}, withdraw.CodeInsufficientBalance},
		{withdraw.Request{User: 2, Asset: "ETH", Amount: 5000, Address: toChecksummed}, withdraw.CodeAccountNotFound},
	} {
		_, _, err := f.svc.Create(ctx, c.r)
		var we *withdraw.Error
		if !errors.As(err, &we) || we.Code != c.code {
			t.Fatalf("%+v: %v, want %s", c.r, err, c.code)
		}
	}
	if f.funding() != 100_000_000 {
		t.Fatal("a refusal changed FUNDING")
	}

	// Completed: 0.1 ETH on chain, once; a repeated cid answers the same withdrawal.
	before, _ := f.node.Balance(to)
	w, dup, err := f.svc.Create(ctx, withdraw.Request{User: 1, Asset: "ETH", Amount: 10_000_000, Address: toChecksummed, CID: "c1"})
	if err != nil || dup || w.State != withdraw.Pending || w.ValueWei.String() != "100000000000000000" {
		t.Fatalf("create: %+v %v %v", w, dup, err)
	}
	if w2, dup, err := f.svc.Create(ctx, withdraw.Request{User: 1, Asset: "ETH", Amount: 10_000_000, Address: toChecksummed, CID: "c1"}); err != nil || !dup || w2.ID != w.ID {
		t.Fatalf("repeat cid: %+v %v %v", w2, dup, err)
	}
	if f.funding() != 90_000_000 {
		t.Fatalf("funding %d after the debit", f.funding())
	}
	f.conserved()
	w = f.settleUntil(w.ID, withdraw.Completed)
	if w.TxState != chaintx.Confirmed {
		t.Fatalf("completed with tx %s", w.TxState)
	}
	after, _ := f.node.Balance(to)
	if d := new(big.Int).Sub(after, before); d.String() != "100000000000000000" {
		t.Fatalf("address received %v wei", d)
	}
	f.conserved()

	// Reverted: refunded once, however often the settler runs.
	reverter := anviltest.Addr(0xdead)
	if err := f.node.SetCode(reverter, "0x60006000fd"); err != nil {
		t.Fatal(err)
	}
	rv, _, err := f.svc.Create(ctx, withdraw.Request{User: 1, Asset: "ETH", Amount: 20_000_000, Address: string(reverter)})
	if err != nil {
		t.Fatal(err)
	}
	f.conserved()
	rv = f.settleUntil(rv.ID, withdraw.Cancelled)
	for range 3 {
		if _, err := f.svc.SettleOnce(ctx, f.store, f.log); err != nil {
			t.Fatal(err)
		}
	}
	if rv.TxState != chaintx.FailedFinal || f.funding() != 90_000_000 {
		t.Fatalf("reverted: tx %s, funding %d (want refunded once: 90000000)", rv.TxState, f.funding())
	}
	f.conserved()

	// STUCK stays PENDING; an operator's CANCEL, once confirmed, cancels and refunds.
	if err := f.node.Automine(false); err != nil {
		t.Fatal(err)
	}
	defer f.node.Automine(true)
	st, _, err := f.svc.Create(ctx, withdraw.Request{User: 1, Asset: "ETH", Amount: 30_000_000, Address: toChecksummed})
	if err != nil {
		t.Fatal(err)
	}
	waitTx(t, f, st.TxID, chaintx.Tracking)
	if _, err := f.pool.Exec(ctx, `UPDATE managed_tx SET allocated_at = now() - interval '2 hours' WHERE tx_id = $1`, int64(st.TxID)); err != nil {
		t.Fatal(err)
	}
	waitTx(t, f, st.TxID, chaintx.Stuck) // StuckAfter is 1h: the row was made 2h old
	if _, err := f.svc.SettleOnce(ctx, f.store, f.log); err != nil {
		t.Fatal(err)
	}
	if w, _ := f.svc.Get(ctx, st.ID); w.State != withdraw.Pending || f.funding() != 60_000_000 {
		t.Fatalf("stuck: %s, funding %d (want PENDING, not refunded)", w.State, f.funding())
	}
	f.conserved()
	if _, err := f.m.Remediate(ctx, st.TxID, chaintx.ActionCancel, "operator: address wrong"); err != nil {
		t.Fatal(err)
	}
	if err := f.node.Automine(true); err != nil {
		t.Fatal(err)
	}
	st = f.settleUntil(st.ID, withdraw.Cancelled)
	if f.funding() != 90_000_000 {
		t.Fatalf("cancelled: funding %d, want 90000000", f.funding())
	}
	f.conserved()
	ws, total, err := f.svc.List(ctx, 1, 1, 10)
	if err != nil || total != 3 || len(ws) != 3 || ws[0].ID != st.ID {
		t.Fatalf("history: %d %d %v", total, len(ws), err)
	}
}

func waitTx(t *testing.T, f *fx, id chaintx.TxID, st chaintx.State) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for {
		tx, err := f.store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if tx.State == st {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("tx %d: %s, want %s", id, tx.State, st)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// flipCase breaks an EIP-55 checksum (mixed case kept).
func flipCase(a string) string {
	b := []byte(a)
	for i := 2; i < len(b); i++ {
		switch {
		case b[i] >= 'a' && b[i] <= 'f':
			b[i] -= 32
			return string(b)
		case b[i] >= 'A' && b[i] <= 'F':
			b[i] += 32
			return string(b)
		}
	}
	return a
}

func TestToChainExactOrRefused(t *testing.T) {
	a := withdraw.Asset{Scale: 8, ChainDecimals: 6} // the exchange keeps more digits than the chain
	if v, ok := a.ToChain(12300); !ok || v.Int64() != 123 {
		t.Fatalf("12300 -> %v %v", v, ok)
	}
	if _, ok := a.ToChain(12345); ok {
		t.Fatal("12345 units at scale 8 is not a whole number of 10^-6")
	}
	b := withdraw.Asset{Scale: 8, ChainDecimals: 18}
	if v, ok := b.ToChain(1); !ok || v.String() != "10000000000" {
		t.Fatalf("1 -> %v", v)
	}
}

func smallPool(t testing.TB, url string) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 3
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func pgxCollectInts(rows pgx.Rows) ([]int64, error) { return pgx.CollectRows(rows, pgx.RowTo[int64]) }
