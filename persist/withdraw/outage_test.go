package withdraw_test

// Issue 41 defect 2 under real outages: Postgres ends every session of the
// test's database (pg_terminate_backend: FATAL 57P01) again and again while
// withdrawals, with and without a cid, are created. Afterwards no withdrawal
// answered "nothing happened" (ErrNotRecorded) exists, every withdrawal row
// is one an answer named (the withdrawal, a duplicate, or UNKNOWN with its
// id), and FUNDING is debited exactly by the withdrawals that exist.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/withdraw"
)

// TestWithdrawOutageKillSessions is the short run: >= 10 outages.
func TestWithdrawOutageKillSessions(t *testing.T) { runWithdrawOutage(t, 4*time.Second, 10) }

// TestWithdrawOutageKillSessionsLong: many outages (make test-long).
func TestWithdrawOutageKillSessionsLong(t *testing.T) {
	if testing.Short() {
		t.Skip("long outage run; -short runs TestWithdrawOutageKillSessions")
	}
	runWithdrawOutage(t, 45*time.Second, 80)
}

func runWithdrawOutage(t *testing.T, length time.Duration, minOutages int64) {
	dbURL := pgtest.NewDB(t)
	bg := context.Background()
	pool, err := pgxpool.New(bg, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := persist.Migrate(bg, pool); err != nil {
		t.Fatal(err)
	}
	const workers = 6
	const start = 100_000_000_000
	for w := range workers {
		if _, err := transfer.NewFunding(transfer.NewBatcher(pool, transfer.BatchOptions{})).ExternalDeposit(bg, fmt.Sprintf("dep-%d", w), core.UserID(200+w), eth, start); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := evm.ParseAddress("0x000000000000000000000000000000000000bEEF")
	if err != nil {
		t.Fatal(err)
	}
	svc := withdraw.New(withdraw.Config{Pool: pool, Submitter: sub, ParseAddress: evm.ParseAddress, SettleWait: 3 * time.Second,
		Assets: []withdraw.Asset{{Symbol: "ETH", ID: eth, Scale: 8, ChainDecimals: 18}}})

	type answer struct {
		user core.UserID
		id   int64
		cid  string
		kind string // ok, duplicate, unknown, nothing (ErrNotRecorded), error (any other)
	}
	var (
		mu      sync.Mutex
		answers []answer
		outages atomic.Int64
	)
	ctx, stop := context.WithTimeout(bg, length)
	defer stop()
	seed := pgtest.Seed(t, "UBS_OUTAGE_SEED")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pgtest.KillSessions(ctx, t, dbURL, 100*time.Millisecond, 250*time.Millisecond, rand.New(rand.NewPCG(seed, 0)), &outages)
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := core.UserID(200 + w)
			rng := rand.New(rand.NewPCG(seed, uint64(1+w)))
			for i := 0; ctx.Err() == nil; i++ {
				req := withdraw.Request{User: user, Asset: "ETH", Amount: core.Units(1_000 * (1 + rng.IntN(1000))),
					Address: "0x00000000000000000000000000000000000000aa"}
				if i%2 == 1 {
					req.CID = fmt.Sprintf("w-%d-%d", w, i)
				}
				wd, dup, err := svc.Create(bg, req)
				a := answer{user: user, id: wd.ID, cid: req.CID, kind: "ok"}
				var unk *withdraw.UnconfirmedError
				var refusal *withdraw.Error
				switch {
				case errors.As(err, &unk):
					a.kind, a.id = "unknown", unk.ID
				case errors.Is(err, withdraw.ErrNotRecorded):
					a.kind = "nothing"
				case errors.As(err, &refusal):
					t.Errorf("refused: %v", err)
				case err != nil:
					a.kind = "error"
				case dup:
					a.kind = "duplicate"
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n := outages.Load(); n < minOutages {
		t.Fatalf("%d outages, want at least %d", n, minOutages)
	}

	named, nothingCIDs, kinds := map[int64]bool{}, map[string]bool{}, map[string]int{}
	for _, a := range answers {
		kinds[a.kind]++
		if a.id != 0 {
			named[a.id] = true
		}
		if (a.kind == "nothing" || a.kind == "error") && a.cid != "" {
			nothingCIDs[fmt.Sprintf("%d/%s", a.user, a.cid)] = true
		}
	}
	rows, err := pool.Query(bg, `SELECT withdrawal_id, user_id, COALESCE(cid, ''), amount FROM withdrawals`)
	if err != nil {
		t.Fatal(err)
	}
	debited := map[core.UserID]int64{}
	var n int
	for rows.Next() {
		var id, user, amount int64
		var cid string
		if err := rows.Scan(&id, &user, &cid, &amount); err != nil {
			t.Fatal(err)
		}
		n++
		debited[core.UserID(user)] += amount
		if !named[id] {
			t.Errorf("withdrawal %d (user %d, cid %q) exists, but its create was answered \"nothing happened\" or an error", id, user, cid)
		}
		if cid != "" && nothingCIDs[fmt.Sprintf("%d/%s", user, cid)] {
			t.Errorf("cid %q of user %d was answered with an error, yet withdrawal %d has it", cid, user, id)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for w := range workers {
		user := core.UserID(200 + w)
		var avail int64
		if err := pool.QueryRow(bg, `SELECT available FROM balances_tb WHERE user_id = $1 AND asset_id = $2`, int64(user), int32(eth)).Scan(&avail); err != nil {
			t.Fatal(err)
		}
		if avail != start-debited[user] {
			t.Errorf("user %d: FUNDING %d, want %d (debited once per withdrawal that exists)", user, avail, start-debited[user])
		}
	}
	t.Logf("%d outages in %v; answers %v; %d withdrawals", outages.Load(), length, kinds, n)
}
