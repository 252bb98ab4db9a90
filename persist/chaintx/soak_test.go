package chaintx_test

// Spec §1.3 (b): a submitter's nonces are strictly increasing in allocation
// order and never reused, across many transactions while leaders are killed
// at random (a manager torn down mid-work, its lease left to expire, a new
// node with a pool of its own taking over), and every request is on chain
// exactly once. -short: 60 transactions and 2 kills; make test-long: 1,000
// and a kill every ~0.8 s.

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/pgstore"
)

func TestNoncesNeverRepeatAcrossLeaderKills(t *testing.T) {
	total, kills, seed := 1000, 1_000_000, time.Now().UnixNano()
	if testing.Short() {
		total, kills = 60, 2
	}
	t.Logf("seed %d (random kill timing)", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	to := anviltest.Addr(100)
	before, err := e.node.Balance(to)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var gen int
	nodes := make([]*chaintx.Manager, 2)
	pools := make([]*pgxpool.Pool, 2)
	t.Cleanup(func() {
		for i, m := range nodes {
			m.Close()
			pools[i].Close()
		}
	})
	startNode := func(slot int) {
		gen++
		pool := smallPool(t, e.url)
		pools[slot] = pool // a dead node's pool is closed: connections stay bounded
		cfg := e.fast(key, fmt.Sprintf("node-%d", gen), pgstore.New(pool))
		cfg.Lease = chaintx.LeaseConfig{Duration: time.Second, RenewInterval: 150 * time.Millisecond}
		cfg.Finality = 1
		m, err := chaintx.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m.Start()
		nodes[slot] = m
	}
	startNode(0)
	startNode(1)
	pick := func() *chaintx.Manager { mu.Lock(); defer mu.Unlock(); return nodes[rng.IntN(2)] }

	var done atomic.Bool
	var killed atomic.Int64 // written by the killer, read by the test
	killerDone := make(chan struct{})
	go func() { // the killer: the current leader dies, a fresh node replaces it
		defer close(killerDone)
		for killed.Load() < int64(kills) && !done.Load() {
			mu.Lock()
			pause := time.Duration(300+rng.IntN(1000)) * time.Millisecond
			if testing.Short() {
				pause /= 3
			}
			mu.Unlock()
			time.Sleep(pause)
			mu.Lock()
			for slot, m := range nodes {
				if _, ok := m.Leader(sub); ok {
					m.Close()
					pools[slot].Close()
					startNode(slot)
					killed.Add(1)
					break
				}
			}
			mu.Unlock()
		}
	}()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				req := transfer(sub, fmt.Sprint("soak-", i), to, i+1)
				for attempt := 0; ; attempt++ {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					_, _, err := pick().Create(ctx, req)
					cancel()
					if err == nil {
						break
					}
					if attempt > 400 {
						t.Errorf("request %d: %v", i, err)
						return
					}
					time.Sleep(25 * time.Millisecond) // not leader / stopped / timed out: retry, same request_id
				}
			}
		}()
	}
	wg.Wait()
	for testing.Short() && killed.Load() < int64(kills) {
		time.Sleep(50 * time.Millisecond) // -short: make sure the kills happened
	}
	done.Store(true)
	<-killerDone
	ctx := context.Background()
	waitFor(t, 120*time.Second, "every tx CONFIRMED", func() bool {
		var n int
		_ = e.pool.QueryRow(ctx, `SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'`).Scan(&n)
		if n < total {
			_ = e.node.Mine(1) // blocks for txs a dead node left in the pool after their broadcast was lost
		}
		return n == total
	})
	t.Logf("%d transactions, %d leader kills, %d nodes", total, killed.Load(), gen)

	rows, err := e.pool.Query(ctx, `SELECT nonce, request_id, receipt_hash = tx_hash FROM managed_tx WHERE submitter = $1 ORDER BY tx_id`, string(sub))
	if err != nil {
		t.Fatal(err)
	}
	var prev int64 = -1
	seen := map[string]bool{}
	count := 0
	for rows.Next() {
		var nonce int64
		var req string
		var own bool
		if err := rows.Scan(&nonce, &req, &own); err != nil {
			t.Fatal(err)
		}
		if nonce <= prev {
			t.Fatalf("nonce %d allocated after %d: not strictly increasing", nonce, prev)
		}
		if seen[req] || !own {
			t.Fatalf("request %s twice, or mined under another hash", req)
		}
		prev, seen[req] = nonce, true
		count++
	}
	if rows.Err() != nil || count != total {
		t.Fatalf("%d managed txs for %d requests (%v)", count, total, rows.Err())
	}
	if mined, err := e.node.Client.MinedNonce(ctx, sub); err != nil || mined != uint64(total) || prev != int64(total-1) {
		t.Fatalf("on chain: %d txs of the submitter (%v), last nonce %d; want %d, no gap", mined, err, prev, total)
	}
	after, _ := e.node.Balance(to)
	want := big.NewInt(int64(total) * int64(total+1) / 2)
	if got := new(big.Int).Sub(after, before); got.Cmp(want) != 0 {
		t.Fatalf("recipient received %v wei, want %v: some request not on chain exactly once", got, want)
	}
}
