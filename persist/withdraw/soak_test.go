package withdraw_test

// Spec 002 §1.3 (b) through withdrawals: many withdrawals while the leader
// of the hot wallet is killed at random (a manager torn down without
// releasing its lease, a new node with its own pool taking over); every
// withdrawal is COMPLETED and on chain exactly once (each to its own address,
// with its exact value), the hot wallet's nonces are 0..N-1 with none
// reused, and the conservation check is exact. -short: 40 withdrawals and
// 2 kills; make test-long: 1,000.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

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

func TestWithdrawalSoakAcrossLeaderKills(t *testing.T) {
	total, kills := 1000, 12
	if testing.Short() {
		total, kills = 40, 2
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	node := anviltest.StartT(t)
	url := pgtest.NewDB(t)
	ctx := context.Background()
	pool := smallPool(t, url)
	defer pool.Close()
	if err := persist.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	chainID, _ := node.Client.ChainID(ctx)
	key, hot := node.NewKey(t)
	signer, err := evm.NewSigner(key, chainID)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	var mu sync.Mutex
	var cur *chaintx.Manager
	var curPool *pgxpool.Pool
	gen := 0
	startNode := func() {
		gen++
		curPool = smallPool(t, url)
		m, err := chaintx.New(chaintx.Config{Store: pgstore.New(curPool), Chain: node.Client, Signers: []chaintx.Signer{signer},
			NodeID: fmt.Sprint("node-", gen), Lease: chaintx.LeaseConfig{Duration: 600 * time.Millisecond, RenewInterval: 100 * time.Millisecond},
			Workers: 2, Finality: 1, TrackInterval: 100 * time.Millisecond, ReceiptInterval: 100 * time.Millisecond,
			ResubmitInterval: time.Second, StuckAfter: time.Hour, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		m.Start()
		cur = m
	}
	startNode()
	defer func() { mu.Lock(); cur.Close(); curPool.Close(); mu.Unlock() }()
	store := pgstore.New(pool)
	svc := withdraw.New(withdraw.Config{Pool: pool, Submitter: hot, ParseAddress: evm.ParseAddress,
		Nudge:  func(a chaintx.Address) { mu.Lock(); cur.Nudge(a); mu.Unlock() },
		Assets: []withdraw.Asset{{Symbol: "ETH", ID: eth, Scale: 8, ChainDecimals: 18}}})
	if _, err := transfer.NewFunding(transfer.NewBatcher(pool, transfer.BatchOptions{})).ExternalDeposit(ctx, "soak", 1, eth, 100_000_000_000); err != nil {
		t.Fatal(err)
	}
	sctx, stopSettler := context.WithCancel(ctx)
	settled := make(chan struct{})
	go func() { defer close(settled); svc.RunSettler(sctx, store, 100*time.Millisecond, log) }()

	stopKiller := make(chan struct{})
	killed := 0
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		for killed < kills {
			select {
			case <-stopKiller:
				return
			case <-time.After(time.Duration(200+rng.IntN(600)) * time.Millisecond):
			}
			mu.Lock()
			cur.Close() // killed: its lease is left to expire
			curPool.Close()
			startNode()
			killed++
			mu.Unlock()
		}
	}()
	var ids []int64
	for i := range total {
		w, _, err := svc.Create(ctx, withdraw.Request{User: 1, Asset: "ETH", Amount: core.Units(1000 + i),
			Address: string(anviltest.Addr(1000 + i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID)
		if i%10 == 0 {
			time.Sleep(20 * time.Millisecond) // spread the creations over the kills
		}
	}
	for testing.Short() && func() bool { mu.Lock(); defer mu.Unlock(); return killed < kills }() {
		time.Sleep(20 * time.Millisecond)
	}
	close(stopKiller)
	<-killerDone
	end := time.Now().Add(120 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM withdrawals WHERE state = 'COMPLETED'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == total {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d withdrawals completed", n, total)
		}
		_ = node.Mine(1) // a tx a dead node broadcast but whose record was lost is resubmitted; mining moves it on
		time.Sleep(100 * time.Millisecond)
	}
	stopSettler()
	<-settled
	t.Logf("%d withdrawals, %d leader kills", total, killed)
	rows, err := pool.Query(ctx, `SELECT nonce FROM managed_tx WHERE submitter = $1 ORDER BY nonce`, string(hot))
	if err != nil {
		t.Fatal(err)
	}
	nonces, err := pgxCollectInts(rows)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range nonces {
		if n != int64(i) {
			t.Fatalf("nonces %v...: not exactly 0..%d, each once", nonces[:min(len(nonces), 20)], total-1)
		}
	}
	if len(nonces) != total {
		t.Fatalf("%d managed txs for %d withdrawals", len(nonces), total)
	}
	if mined, err := node.Client.MinedNonce(ctx, hot); err != nil || mined != uint64(total) {
		t.Fatalf("hot wallet sent %d txs on chain (%v), want %d", mined, err, total)
	}
	for i := range total {
		bal, err := node.Balance(anviltest.Addr(1000 + i))
		want := new(big.Int).Mul(big.NewInt(1000+int64(i)), big.NewInt(10_000_000_000))
		if err != nil || bal.Cmp(want) != 0 {
			t.Fatalf("withdrawal %d: address holds %v wei, want %v (on chain exactly once)", ids[i], bal, want)
		}
	}
	rep, err := invariant.CheckInvariant(ctx, pool, noSpot{}, nil)
	if err != nil || !rep.OK {
		t.Fatalf("conservation: %+v %v", rep.Assets, err)
	}
}
