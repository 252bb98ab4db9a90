package transfer

// Issue 41 defect 2 under real outages: Postgres ends the exchange's
// sessions (pg_terminate_backend on every backend of the test's database:
// FATAL 57P01, as in a fast shutdown) again and again while transfers in
// both directions (two coordinators, as two processes would, with and
// without a cid) and external
// deposits run. Afterwards no transfer answered "nothing happened" exists,
// every answered transfer ends terminal with the funds moved once (FUNDING,
// the transfer table and the SPOT balances agree), and every deposit
// retried with its tx_ref is credited exactly once.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/persist/transfer/fakespot"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/testkit"
	"github.com/ubscore/ubscore/persist/transfer/transferfault"
)

// TestOutageKillSessions is the short run (default suite): >= 10 outages.
func TestOutageKillSessions(t *testing.T) {
	runOutage(t, 5*time.Second, 12)
}

// TestOutageKillSessionsLong: many outages (make test-long).
func TestOutageKillSessionsLong(t *testing.T) {
	if testing.Short() {
		t.Skip("long outage run; -short runs TestOutageKillSessions")
	}
	runOutage(t, 60*time.Second, 100)
}

func runOutage(t *testing.T, length time.Duration, minOutages int64) {
	dbURL := pgtest.NewDB(t)
	pool := testkit.MigratedPool(t, dbURL, 16)
	b := NewBatcher(pool, BatchOptions{})
	b.Start()
	t.Cleanup(b.Close)
	h := &harness{t: t, pool: pool, store: NewStore(b), funding: NewFunding(b),
		spot: fakespot.New(), crit: &testkit.CritCounter{}}
	h.spotF = transferfault.New(h.spot)
	timing := func(c *Config) {
		c.MaxWait, c.CallTimeout, c.SettleWait, c.RetryBase, c.RetryMax = time.Second, time.Second, 3*time.Second,
			5*time.Millisecond, 100*time.Millisecond
	}
	first := h.newCoordinator(timing)
	second := h.newCoordinator(timing) // another process's driver
	h.coord = first

	const workers = 8
	const start = Units(100_000_000)
	for w := range workers {
		h.deposit(UserID(100+w), usdt, start)
		h.spot.Credit(UserID(100+w), usdt, start)
	}

	type answer struct {
		reqID string
		cid   string
		kind  string // ok, duplicate, unconfirmed, nothing (an error: "nothing happened"), refused
		err   error
	}
	var (
		mu       sync.Mutex
		answers  = map[UserID][]answer{}
		outages  atomic.Int64
		deposits sync.Map // tx_ref -> amount, credited once by the end
	)
	ctx, stop := context.WithTimeout(context.Background(), length)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	seed := pgtest.Seed(t, "UBS_OUTAGE_SEED")
	go func() {
		defer wg.Done()
		pgtest.KillSessions(ctx, t, dbURL, 150*time.Millisecond, 300*time.Millisecond, rand.New(rand.NewPCG(seed, 0)), &outages)
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := UserID(100 + w)
			rng := rand.New(rand.NewPCG(seed, uint64(1+w)))
			for i := 0; ctx.Err() == nil; i++ {
				c := first
				if (w+i)%3 != 0 {
					c = second
				}
				req := model.Request{From: "FUNDING", To: "SPOT", Asset: "USDT", Amount: fmt.Sprintf("0.%06d", 1+rng.IntN(999))}
				if i%2 == 1 {
					req.From, req.To = "SPOT", "FUNDING"
				}
				if i%4 >= 2 {
					req.CID = fmt.Sprintf("o-%d-%d", w, i)
				}
				r, err := c.Create(context.Background(), model.Caller{Authenticated: true, UserID: user}, req)
				a := answer{reqID: r.Transfer.ReqID, cid: req.CID, kind: "ok", err: err}
				var refusal *model.Error
				switch {
				case errors.As(err, &refusal):
					a.kind = "refused"
				case err != nil:
					a.kind = "nothing"
				case r.Unconfirmed:
					a.kind = "unconfirmed"
				case r.Duplicate:
					a.kind = "duplicate"
				}
				mu.Lock()
				answers[user] = append(answers[user], a)
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() { // external deposits, each retried with its tx_ref until it is answered
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 1000))
		for i := 0; ctx.Err() == nil; i++ {
			ref, user, amount := fmt.Sprintf("dep-%d", i), UserID(100+i%workers), Units(1+rng.Int64N(1000))
			deposits.Store(ref, amount)
			for {
				if _, err := h.funding.ExternalDeposit(context.Background(), ref, user, usdt, amount); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	wg.Wait()
	if n := outages.Load(); n < minOutages {
		t.Fatalf("%d outages, want at least %d", n, minOutages)
	}

	// Settle: drive every transfer to a terminal state (the database is back).
	bg := context.Background()
	rows, err := pool.Query(bg, `SELECT req_id, user_id, COALESCE(cid, ''), state FROM transfers_tb`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		reqID, cid string
		user       int64
		state      State
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.reqID, &x.user, &x.cid, &x.state)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range all {
		if x.state.Terminal() {
			continue
		}
		dctx, cancel := context.WithTimeout(bg, 10*time.Second)
		tr, err := first.Drive(dctx, x.reqID)
		cancel()
		if err != nil || !tr.State.Terminal() {
			t.Fatalf("transfer %s stays %s after the outages: %v", x.reqID, tr.State, err)
		}
		all[i].state = tr.State
	}

	// No transfer answered "nothing happened" exists: every row is one an
	// answer named, and no cid answered with an error has a row.
	kinds, nothingErrs := map[string]int{}, map[string]int{}
	named, nothingCIDs := map[string]bool{}, map[string]bool{}
	for user, as := range answers {
		for _, a := range as {
			kinds[a.kind]++
			if a.kind == "nothing" {
				msg := a.err.Error()
				if i := strings.Index(msg, "01"); strings.HasPrefix(msg, "transfer: insert ") && i >= 0 {
					msg = msg[:i] + msg[min(len(msg), i+26):] // without the req_id
				}
				nothingErrs[msg]++
			}
			switch {
			case a.kind == "nothing" && a.cid != "":
				nothingCIDs[fmt.Sprintf("%d/%s", user, a.cid)] = true
			case a.reqID != "":
				named[a.reqID] = true
			}
		}
	}
	for _, x := range all {
		if !named[x.reqID] {
			t.Errorf("transfer %s (user %d, cid %q) is %s, but its create was answered \"nothing happened\"", x.reqID, x.user, x.cid, x.state)
		}
		if nothingCIDs[fmt.Sprintf("%d/%s", x.user, x.cid)] {
			t.Errorf("cid %q of user %d was answered \"nothing happened\", yet transfer %s has it (%s)", x.cid, x.user, x.reqID, x.state)
		}
	}

	// The funds moved once per committed transfer: FUNDING and SPOT of
	// every user are its start, its deposits and its committed transfers.
	wantF, wantS := map[UserID]Units{}, map[UserID]Units{}
	for w := range workers {
		wantF[UserID(100+w)], wantS[UserID(100+w)] = start, start
	}
	var dsum Units
	var nDeps int64
	deposits.Range(func(k, v any) bool {
		var i int
		fmt.Sscanf(k.(string), "dep-%d", &i)
		wantF[UserID(100+i%workers)] += v.(Units)
		dsum += v.(Units)
		nDeps++
		return true
	})
	var gotDeps int64
	var gotSum Units
	if err := pool.QueryRow(bg, `SELECT count(*), COALESCE(sum(amount), 0)::bigint FROM funding_deposits WHERE tx_ref LIKE 'dep-%'`).Scan(&gotDeps, &gotSum); err != nil {
		t.Fatal(err)
	}
	if gotDeps != nDeps || gotSum != dsum {
		t.Errorf("deposits: %d credited for %d, sum %d want %d", gotDeps, nDeps, gotSum, dsum)
	}
	for _, x := range all {
		if x.state != Committed {
			continue
		}
		tr := h.get(x.reqID)
		if tr.From == model.AccountFunding {
			wantF[tr.UserID] -= tr.Amount
			wantS[tr.UserID] += tr.Amount
		} else {
			wantF[tr.UserID] += tr.Amount
			wantS[tr.UserID] -= tr.Amount
		}
	}
	for user := range wantF {
		if f, s := h.fundingBalance(user, usdt), h.spot.Balance(user, usdt); f != wantF[user] || s != wantS[user] {
			t.Errorf("user %d: funding %d spot %d, want %d %d from its committed transfers", user, f, s, wantF[user], wantS[user])
		}
	}
	h.conserved(usdt)
	states := map[State]int{}
	for _, x := range all {
		states[x.state]++
	}
	t.Logf("%d outages in %v; answers %v; rows %d %v; deposits %d; batches failed %d", outages.Load(), length, kinds, len(all),
		states, nDeps, b.Stats().Failed.Load())
	for msg, n := range nothingErrs {
		t.Logf("answered \"nothing happened\" %d times: %s", n, msg)
	}
}
