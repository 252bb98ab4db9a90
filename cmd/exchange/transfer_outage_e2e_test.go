package main

// Issue 41 defect 2 against the real binary, the real core and a real
// Postgres: Postgres ends every session of the exchange's database
// (pg_terminate_backend: FATAL 57P01, as in a fast shutdown) again and
// again while users post internal transfers both ways, with and without a
// cid. Afterwards no transfer answered "nothing happened" exists (every row
// is one an answer named by req_id; no cid answered "nothing happened" has
// a row), and FUNDING and the core's SPOT balances of every user are its
// start plus exactly its committed transfers; the conservation check holds.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubscore/ubscore/gateway/openapitest"
	"github.com/ubscore/ubscore/persist/pgtest"
)

// TestTransferOutageE2ELong: >= 80 outages in 60 s (make test-long; the
// default suite runs the same check in-process: persist/transfer
// TestOutageKillSessions, persist/withdraw TestWithdrawOutageKillSessions).
func TestTransferOutageE2ELong(t *testing.T) {
	if testing.Short() {
		t.Skip("long outage run against the binary (make test-long)")
	}
	transferOutageE2E(t, 60*time.Second, 80)
}

func transferOutageE2E(t *testing.T, length time.Duration, minOutages int64) {
	x := crashXT(t)
	const workers = 16
	users := make([]uint64, workers)
	for i := range users {
		users[i] = x.user()
		x.deposit(users[i], "USDT", "1000")
		x.credit(users[i], "USDT", "1000")
	}
	start := units(t, "USDT", "1000")
	mine := x.db().PgConn().PID() // the test's own connection survives the outages
	// A client that waits longer than any answer may take (the gateway's 30
	// s), so that every create gets its answer: a request without one could
	// hide a transfer.
	patient := *x.s
	patient.client = &http.Client{Timeout: 45 * time.Second, Transport: openapitest.Transport(t, nil)}

	type sent struct {
		user uint64
		cid  string
		a    answer
	}
	var (
		mu      sync.Mutex
		all     []sent
		outages atomic.Int64
	)
	ctx, stop := context.WithTimeout(context.Background(), length)
	defer stop()
	seed := pgtest.Seed(t, "UBS_OUTAGE_SEED")
	var wg sync.WaitGroup
	wg.Go(func() { // gaps leave time to reconnect: the exchange's set-up runs statements
		pgtest.KillSessions(ctx, t, x.pg, 300*time.Millisecond, 400*time.Millisecond, rand.New(rand.NewPCG(seed, 0)), &outages,
			mine)
	})
	for w, user := range users {
		wg.Go(func() {
			tok := x.tok(user)
			rng := rand.New(rand.NewPCG(seed, uint64(1+w)))
			for i := 0; ctx.Err() == nil; i++ {
				from, to := F, S
				if i%2 == 1 {
					from, to = S, F
				}
				body := xferBody(from, to, "USDT", fmt.Sprintf("0.%02d", 1+rng.IntN(99)))
				cid := ""
				if i%4 >= 2 {
					cid = fmt.Sprintf("oe-%d-%d", w, i)
					body["cid"] = cid
				}
				st, b, err := patient.tryDo("POST", "/api/v1/internal_transfer", tok, body)
				a := answer{st, b, err}
				mu.Lock()
				all = append(all, sent{user, cid, a})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := outages.Load(); n < minOutages {
		t.Fatalf("%d outages, want at least %d", n, minOutages)
	}

	// Every transfer reaches a terminal state (the recovery worker resumes
	// what the outages left).
	deadline := time.Now().Add(90 * time.Second)
	for x.queryInt(`SELECT count(*) FROM transfers_tb WHERE state NOT IN ($1, $2, $3)`, stCommitted, stFailed, stRolledBack) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("transfers still moving 90 s after the outages")
		}
		time.Sleep(200 * time.Millisecond)
	}

	named, nothing, kinds := map[string]bool{}, map[string]bool{}, map[string]int{}
	for _, s := range all {
		id, _ := s.a.b["req_id"].(string)
		msg, _ := s.a.b["message"].(string)
		switch {
		case s.a.err != nil:
			t.Errorf("no answer to a create: %v", s.a.err)
		case id != "":
			named[id] = true
			kinds[fmt.Sprintf("%d %v", s.a.st, s.a.b["state"])]++
		case strings.Contains(msg, "nothing happened"):
			kinds["nothing happened"]++
			if s.cid != "" {
				nothing[fmt.Sprintf("%d/%s", s.user, s.cid)] = true
			}
		default:
			kinds[fmt.Sprintf("%d %v", s.a.st, s.a.b["code"])]++
		}
	}
	rows, err := x.db().Query(context.Background(), `SELECT req_id, user_id, COALESCE(cid, ''), state, amount, from_account
		FROM transfers_tb WHERE user_id = ANY($1)`, users)
	if err != nil {
		t.Fatal(err)
	}
	funding, spot := map[uint64]int64{}, map[uint64]int64{}
	for _, u := range users {
		funding[u], spot[u] = start, start
	}
	n := 0
	for rows.Next() {
		var id, cid, fromAcct string
		var user, amount int64
		var state int
		if err := rows.Scan(&id, &user, &cid, &state, &amount, &fromAcct); err != nil {
			t.Fatal(err)
		}
		n++
		if !named[id] {
			t.Errorf("transfer %s (user %d, cid %q) is in state %d, but no answer named it (answered \"nothing happened\"?)", id, user, cid, state)
		}
		if nothing[fmt.Sprintf("%d/%s", user, cid)] {
			t.Errorf("cid %q of user %d was answered \"nothing happened\", yet transfer %s has it (state %d)", cid, user, id, state)
		}
		if state == stCommitted {
			d := amount
			if fromAcct == F {
				d = -amount
			}
			funding[uint64(user)] += d
			spot[uint64(user)] -= d
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		x.wantBal(u, "USDT", spot[u], funding[u])
	}
	x.invariantOK()
	t.Logf("%d outages in %v; %d answers %v; %d transfers", outages.Load(), length, len(all), kinds, n)
	causes := map[string]int{} // why "nothing happened" was answered (the server logs the error)
	for _, l := range strings.Split(x.s.Logs(), "\n") {
		if i := strings.Index(l, `"err":"`); i >= 0 && strings.Contains(l, "transfer service failed") {
			c := l[i+7:]
			if j := strings.Index(c, "SQLSTATE"); j >= 0 {
				c = c[:j]
			}
			if j := strings.Index(c, "transfer: insert "); j >= 0 && len(c) > j+43 {
				c = c[:j+17] + c[j+43:]
			}
			causes[c]++
		}
	}
	for c, k := range causes {
		t.Logf("answered \"nothing happened\" %d times after: %s", k, c)
	}
}
