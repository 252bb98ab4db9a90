package chaintx_test

// Benchmarks (numbers in docs/withdrawals.md):
//
//	go test -run '^$' -bench 'BenchmarkCreate' -benchtime 1x ./persist/chaintx
//
// BenchmarkCreateBatchedVsNaive: managed-tx creations per second through the
// writer workers (one transaction per batch) beside the naive allocation
// (each request its own transaction: SELECT ... FOR UPDATE on the cursor,
// insert, cursor update; then its own submitted record), same Postgres, same
// Store code, same clients; one submitter and 16; 3 rounds of 3 s per mode,
// each round alternating the modes in 1 s segments. The
// chain is a stub that accepts every broadcast at once, so both measure
// Postgres and signing only.
// BenchmarkCreateToConfirmed: create -> CONFIRMED on anvil mining a block
// every second, finality 3 (UBS_BENCH_FINALITY to change).

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/chaintx/pgstore"
	"github.com/ubscore/ubscore/persist/pgtest"
)

// stubChain accepts everything instantly.
type stubChain struct{}

func (stubChain) ChainID(context.Context) (*big.Int, error)                     { return big.NewInt(31337), nil }
func (stubChain) PendingNonce(context.Context, chaintx.Address) (uint64, error) { return 0, nil }
func (stubChain) MinedNonce(context.Context, chaintx.Address) (uint64, error)   { return 0, nil }
func (stubChain) Send(context.Context, []byte) error                            { return nil }
func (stubChain) MinedNonceAt(context.Context, chaintx.Address, uint64) (uint64, error) {
	return 0, nil
}
func (stubChain) Receipt(context.Context, chaintx.Hash) (chaintx.ChainReceipt, error) {
	return chaintx.ChainReceipt{}, chaintx.ErrReceiptNotFound
}
func (stubChain) Head(context.Context) (uint64, error)                    { return 1, nil }
func (stubChain) BlockHash(context.Context, uint64) (chaintx.Hash, error) { return "", nil }
func (stubChain) Fees(context.Context) (chaintx.Fees, error) {
	return chaintx.Fees{MaxFee: big.NewInt(2_000_000_000), MaxTip: big.NewInt(1_000_000_000)}, nil
}

func randomSigners(b testing.TB, n int) []chaintx.Signer {
	out := make([]chaintx.Signer, n)
	for i := range out {
		k, err := crypto.GenerateKey()
		if err != nil {
			b.Fatal(err)
		}
		s, err := evm.NewSigner(fmt.Sprintf("%x", crypto.FromECDSA(k)), big.NewInt(31337))
		if err != nil {
			b.Fatal(err)
		}
		out[i] = s
	}
	return out
}

const benchClients = 64

// run runs clients for d, each calling create in a loop, and returns the
// creations and the time they took (until the last client's call ended).
func run(d time.Duration, create func(client, i int) error) (int64, time.Duration, error) {
	var n atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				if err := create(c, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return 0, 0, e.(error)
	}
	return n.Load(), time.Since(start), nil
}

// benchSegments: each round alternates the two modes this many times, so
// that the load of the machine's neighbours (bursty: other test suites)
// falls on both alike.
const benchSegments = 3

func BenchmarkCreateBatchedVsNaive(b *testing.B) {
	url := pgtest.NewDB(b)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = benchClients + 8 // the naive mode holds one connection per client
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if err := persist.Migrate(ctx, pool); err != nil {
		b.Fatal(err)
	}
	store := pgstore.New(pool)
	d := 3 * time.Second
	for _, nsub := range []int{1, 16} {
		signers := randomSigners(b, nsub)
		workers, _ := strconv.Atoi(os.Getenv("UBS_BENCH_WORKERS"))       // 0: the default
		committers, _ := strconv.Atoi(os.Getenv("UBS_BENCH_COMMITTERS")) // 0: the default
		m, err := chaintx.New(chaintx.Config{Store: store, Chain: stubChain{}, Signers: signers, NodeID: "bench", Workers: workers, Committers: committers,
			Lease: chaintx.LeaseConfig{Duration: time.Hour}, TrackInterval: time.Hour, Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		m.Start()
		leases := map[chaintx.Address]chaintx.Lease{}
		for _, s := range signers {
			l, ok := m.Leader(s.Address())
			if !ok {
				b.Fatal("not leader")
			}
			leases[s.Address()] = l
		}
		req := func(mode string, seg, c, i int) chaintx.NewTx {
			s := signers[c%nsub].Address()
			return transfer(s, fmt.Sprintf("%s-%d-%d-%d", mode, seg, c, i), anviltest.Addr(c), 1)
		}
		naiveCreate := func(seg int) func(c, i int) error {
			return func(c, i int) error { // naive: one transaction per request, same Store code
				n := req("n", seg, c, i)
				l := leases[n.Submitter]
				signer := signers[c%nsub]
				res, err := allocOne(store, l, []chaintx.NewTx{n}, 0, func(db uint64, txs []*chaintx.Tx) (uint64, error) {
					nonce := db
					h, raw, err := signer.Sign(chaintx.Unsigned{Nonce: nonce, Payload: txs[0].Payload,
						Fees: chaintx.Fees{MaxFee: big.NewInt(2_000_000_000), MaxTip: big.NewInt(1_000_000_000)}})
					txs[0].Nonce, txs[0].Hash = &nonce, h
					txs[0].Signed = []chaintx.Signed{{Hash: h, Raw: raw, Kind: chaintx.KindOriginal, MaxFee: big.NewInt(2_000_000_000), MaxTip: big.NewInt(1_000_000_000)}}
					return db + 1, err
				})
				if err != nil {
					return err
				}
				return submittedOne(store, l, []chaintx.SubmitResult{{ID: res.Allocated[0].ID}}, time.Hour)
			}
		}
		batchedCreate := func(seg int) func(c, i int) error {
			return func(c, i int) error { // batched: the writer workers
				_, _, err := m.Create(ctx, req("b", seg, c, i))
				return err
			}
		}
		var batched, naive, ratios []float64
		for round := range 3 {
			var nn, nb int64
			var tn, tb time.Duration
			for seg := round * benchSegments; seg < (round+1)*benchSegments; seg++ {
				n, t, err := run(d/benchSegments, naiveCreate(seg))
				if err != nil {
					b.Fatal(err)
				}
				nn, tn = nn+n, tn+t
				if n, t, err = run(d/benchSegments, batchedCreate(seg)); err != nil {
					b.Fatal(err)
				}
				nb, tb = nb+n, tb+t
			}
			rn, rb := float64(nn)/tn.Seconds(), float64(nb)/tb.Seconds()
			naive, batched, ratios = append(naive, rn), append(batched, rb), append(ratios, rb/rn)
			b.Logf("submitters %d round %d: batched %.0f/s naive %.0f/s ratio %.2f", nsub, round, rb, rn, rb/rn)
		}
		m.Close()
		var upd, hot int64                  // HOT updates (migration 0032): the broadcast records should be
		time.Sleep(1500 * time.Millisecond) // backends report their counts within a second
		if err := pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'managed_tx'`).Scan(&upd, &hot); err == nil {
			b.Logf("managed_tx updates so far: %d, HOT %d", upd, hot)
		}
		tag := strconv.Itoa(nsub) + "sub"
		b.ReportMetric(median(batched), "batched_tx/s_"+tag)
		b.ReportMetric(median(naive), "naive_tx/s_"+tag)
		b.ReportMetric(median(ratios), "ratio_"+tag)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func BenchmarkCreateToConfirmed(b *testing.B) {
	node, err := anviltest.Start("--block-time", "1")
	if err != nil {
		b.Skip(err)
	}
	defer node.Stop()
	finality := uint64(3)
	if v, err := strconv.Atoi(os.Getenv("UBS_BENCH_FINALITY")); err == nil && v > 0 {
		finality = uint64(v)
	}
	url := pgtest.NewDB(b)
	ctx := context.Background()
	pool := migratedPool(b, url)
	store := pgstore.New(pool)
	key, sub := node.NewKey(b)
	chainID, _ := node.Client.ChainID(ctx)
	signer, err := evm.NewSigner(key, chainID)
	if err != nil {
		b.Fatal(err)
	}
	m, err := chaintx.New(chaintx.Config{Store: store, Chain: node.Client, Signers: []chaintx.Signer{signer}, NodeID: "bench",
		Finality: finality, TrackInterval: 100 * time.Millisecond, ReceiptInterval: 100 * time.Millisecond, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	m.Start()
	defer m.Close()
	var lat []float64
	for i := range 10 {
		start := time.Now()
		tx, _, err := m.Create(ctx, transfer(sub, "c"+strconv.Itoa(i), anviltest.Addr(9), 1))
		if err != nil {
			b.Fatal(err)
		}
		for {
			got, err := store.Get(ctx, tx.ID)
			if err != nil {
				b.Fatal(err)
			}
			if got.State == chaintx.Confirmed {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("tx %d not confirmed after a minute: %s", tx.ID, got.State)
			}
			time.Sleep(10 * time.Millisecond)
		}
		lat = append(lat, time.Since(start).Seconds())
	}
	slices.Sort(lat)
	b.Logf("finality %d, 1 s blocks: create -> CONFIRMED p50 %.2fs min %.2fs max %.2fs", finality, median(lat), lat[0], lat[len(lat)-1])
	b.ReportMetric(median(lat), "s_to_confirmed_p50")
	b.ReportMetric(lat[len(lat)-1], "s_to_confirmed_max")
}
