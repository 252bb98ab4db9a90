package chaintx_test

// The harness of the chaintx tests: real Postgres (a database per test,
// persist/pgtest) and an anvil per test (anviltest; 0.2 s to start), so
// tests that stop or control mining run in parallel (at most -parallel,
// GOMAXPROCS, at once) with those that need it on. Submitters are fresh keys
// funded on the node.

import (
	"context"
	"io"
	"log/slog"
	"math/big"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/chaintx/pgstore"
	"github.com/ubscore/ubscore/persist/pgtest"
)

type env struct {
	t     testing.TB
	url   string
	pool  *pgxpool.Pool
	store *pgstore.Store
	node  *anviltest.Node
	chain *big.Int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	n := anviltest.StartT(t)
	url := pgtest.NewDB(t)
	e := &env{t: t, url: url, node: n}
	e.pool = e.newPool()
	if err := persist.Migrate(context.Background(), e.pool); err != nil {
		t.Fatal(err)
	}
	e.store = pgstore.New(e.pool)
	var err error
	if e.chain, err = n.Client.ChainID(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// newPool is a pool of its own (a second "node" gets a second pool), of
// at most 3 connections (parallel tests share the server with other suites).
func (e *env) newPool() *pgxpool.Pool {
	p := smallPool(e.t, e.url)
	e.t.Cleanup(p.Close)
	return p
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

func (e *env) signer(key string) *evm.Signer {
	s, err := evm.NewSigner(key, e.chain)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// fast is the tests' configuration: short lease, tracker and intervals.
func (e *env) fast(key, nodeID string, store chaintx.Store) chaintx.Config {
	return chaintx.Config{Store: store, Chain: e.node.Client, Signers: []chaintx.Signer{e.signer(key)}, NodeID: nodeID,
		Lease:   chaintx.LeaseConfig{Duration: 2 * time.Second, RenewInterval: 300 * time.Millisecond},
		Workers: 4, Finality: 2, TrackInterval: 100 * time.Millisecond, ReceiptInterval: 100 * time.Millisecond,
		ResubmitInterval: time.Second, StuckAfter: time.Hour, Logger: quiet()}
}

func (e *env) start(cfg chaintx.Config) *chaintx.Manager {
	m, err := chaintx.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	m.Start()
	e.t.Cleanup(m.Close)
	return m
}

func quiet() *slog.Logger {
	if os.Getenv("UBS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func transfer(sub chaintx.Address, req string, to chaintx.Address, wei int64) chaintx.NewTx {
	return chaintx.NewTx{Submitter: sub, RequestID: req, Payload: chaintx.Payload{To: to, Value: big.NewInt(wei), GasLimit: 21000}}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) get(id chaintx.TxID) chaintx.Tx {
	e.t.Helper()
	tx, err := e.store.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return tx
}

func (e *env) waitState(id chaintx.TxID, st chaintx.State, d time.Duration) chaintx.Tx {
	e.t.Helper()
	var tx chaintx.Tx
	waitFor(e.t, d, "tx "+string(st), func() bool { tx = e.get(id); return tx.State == st })
	return tx
}

// waitSent waits until the tx's broadcast is recorded: TRACKING, or STUCK
// already (a short StuckAfter may pass before a poll sees TRACKING).
func (e *env) waitSent(id chaintx.TxID, d time.Duration) chaintx.Tx {
	e.t.Helper()
	var tx chaintx.Tx
	waitFor(e.t, d, "tx sent", func() bool {
		tx = e.get(id)
		return tx.SubmitAttempts > 0 && (tx.State == chaintx.Tracking || tx.State == chaintx.Stuck)
	})
	return tx
}

func (e *env) create(m *chaintx.Manager, n chaintx.NewTx) chaintx.Tx {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, _, err := m.Create(ctx, n)
	if err != nil {
		e.t.Fatal(err)
	}
	return tx
}

// completions returns the whole feed.
func (e *env) completions() []chaintx.Completion {
	e.t.Helper()
	cs, err := e.store.Completions(context.Background(), 0, 10000)
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

func itoa(n uint64) string { return big.NewInt(0).SetUint64(n).String() }

// allocOne is Store.Allocate of one group.
func allocOne(s chaintx.Store, l chaintx.Lease, reqs []chaintx.NewTx, maxCreated int, assign chaintx.Assign) (chaintx.AllocResult, error) {
	res, err := s.Allocate(context.Background(), []chaintx.AllocGroup{{Lease: l, Reqs: reqs, MaxCreated: maxCreated, Assign: assign}})
	if err != nil {
		return chaintx.AllocResult{}, err
	}
	return res[0], res[0].Err
}

// submittedOne is Store.Submitted of one group.
func submittedOne(s chaintx.Store, l chaintx.Lease, rs []chaintx.SubmitResult, after time.Duration) error {
	errs, err := s.Submitted(context.Background(), []chaintx.SubmitGroup{{Lease: l, Results: rs}}, after)
	if err != nil {
		return err
	}
	return errs[0]
}
