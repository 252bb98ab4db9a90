package transfer

// Issue 41 defect 2: a Postgres FATAL (57P01, what pg_terminate_backend and
// a fast shutdown send) on a create's insert proves nothing — it can come
// after the COMMIT committed — so Create must not answer "nothing recorded"
// on it: it settles the req_id (settleInsert's fence) and answers the
// transfer. The proxy (pgtest.Proxy.FatalAfter) sends the FATAL right after
// the insert's transaction committed (the fused INSERT + first move +
// COMMIT), and after the COMMIT of the transfer's next step (the FATAL then
// meets Create driving an existing row: an unknown outcome, never a
// failure), in both directions, with and without a cid.

import (
	"context"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// nthCommit matches the n-th COMMIT after it is armed.
func nthCommit(n int) func() func(string) bool {
	return func() func(string) bool {
		seen := 0
		return func(tag string) bool {
			if tag == "COMMIT" {
				seen++
			}
			return tag == "COMMIT" && seen == n
		}
	}
}

func TestCreateFatalAfterCommitIsNotNothingHappened(t *testing.T) {
	for _, mode := range []struct {
		name  string
		match func() func(string) bool
	}{
		{"insert", nthCommit(1)},
		{"next step", nthCommit(2)},
	} {
		t.Run(mode.name, func(t *testing.T) {
			h, proxy := newProxiedHarness(t)
			h.coord = h.newCoordinator(func(c *Config) { c.CallTimeout, c.SettleWait = time.Second, 5*time.Second })
			user := UserID(40)
			for _, c := range []struct{ from, to, cid string }{
				{"FUNDING", "SPOT", ""}, {"SPOT", "FUNDING", ""}, {"FUNDING", "SPOT", "c-fs"}, {"SPOT", "FUNDING", "c-sf"},
			} {
				user++
				h.deposit(user, usdt, 10_000)
				h.spot.Credit(user, usdt, 10_000)
				proxy.FatalAfter(mode.match())
				req := model.Request{From: c.from, To: c.to, Asset: "USDT", Amount: "0.004", CID: c.cid}
				r, err := h.coord.Create(context.Background(), model.Caller{Authenticated: true, UserID: user}, req)
				if !proxy.Fired() {
					t.Fatalf("%s->%s cid %q: the FATAL was not injected", c.from, c.to, c.cid)
				}
				var n int64
				if qerr := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM transfers_tb WHERE user_id = $1`, int64(user)).Scan(&n); qerr != nil {
					t.Fatal(qerr)
				}
				if err != nil {
					t.Fatalf("%s->%s cid %q: Create answered %q (nothing happened) after its insert committed; %d transfer rows exist",
						c.from, c.to, c.cid, err, n)
				}
				if r.Unconfirmed || r.Duplicate || r.Transfer.ReqID == "" || n != 1 {
					t.Fatalf("%s->%s cid %q: answer %+v with %d rows, want the one transfer", c.from, c.to, c.cid, r, n)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				tr, err := h.coord.Drive(ctx, r.Transfer.ReqID)
				cancel()
				if err != nil || tr.State != Committed {
					t.Fatalf("%s->%s cid %q: %s %v, want COMMITTED", c.from, c.to, c.cid, tr.State, err)
				}
				wantF, wantS := Units(6_000), Units(14_000)
				if c.from == "SPOT" {
					wantF, wantS = 14_000, 6_000
				}
				if f, s := h.fundingBalance(user, usdt), h.spot.Balance(user, usdt); f != wantF || s != wantS {
					t.Fatalf("%s->%s cid %q: funding %d spot %d, want %d %d (moved once)", c.from, c.to, c.cid, f, s, wantF, wantS)
				}
				if c.cid != "" { // a retry with the cid is the same transfer
					r2, err := h.coord.Create(context.Background(), model.Caller{Authenticated: true, UserID: user}, req)
					if err != nil || !r2.Duplicate || r2.Transfer.ReqID != r.Transfer.ReqID {
						t.Fatalf("retry with cid %q: %+v %v", c.cid, r2, err)
					}
				}
			}
			h.conserved(usdt)
		})
	}
}
