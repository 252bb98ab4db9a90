package persist

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
)

// TestSinkP2PTables writes a transfer-service stream (users, transfers
// completed, cancelled, failed, a repeated requestId) in batches of
// several sizes and checks the spec's tables: p2p_transfers with its
// statuses and times, balance_changes with before/after and the
// (external_id, type) key, user_balances with the balances after; every
// batch size gives the same rows (batches of one with a new sink each: the
// handles are then read back from user_balances).
func TestSinkP2PTables(t *testing.T) {
	const usd core.AssetID = 3
	const hold = int64(5_000_000) // 5 ms: the recorder's clock moves 1 ms per command
	r := newRecorder(t)
	r.ok(core.Command{Kind: core.KindConfigAsset, Asset: usd, BaseScale: 2})
	user := func(id core.UserID, h string, amt core.Units) {
		r.ok(core.Command{Kind: core.KindP2PCreateUser, User: id, Text: h, Asset: usd, Amount: amt})
	}
	xfer := func(from, to core.UserID, amt core.Units, req string) {
		c := core.Command{Kind: core.KindP2PTransfer, User: from, OrderID: core.OrderID(to), Asset: usd, Amount: amt, Qty: core.Units(hold)}
		if req != "" {
			c.Key, _ = core.KeyFrom(req)
		}
		r.ok(c)
	}
	user(11, "alice", 100_000)
	user(12, "bob", 0)
	user(13, "carol", 500)
	xfer(11, 12, 15_000, "r-1") // 1: COMPLETED
	xfer(11, 12, 15_000, "r-1") // repeat: nothing
	xfer(11, 13, 2_000, "")     // 2: CANCELLED
	xfer(13, 11, 100, "")       // 3: DEBIT_FAILED (carol frozen)
	r.ok(core.Command{Kind: core.KindP2PCancel, User: 11, OrderID: 2})
	r.ok(core.Command{Kind: core.KindSetAccountStatus, User: 13, Status: core.Frozen})
	for range 5 {
		r.ok(core.Command{Kind: core.KindSnapshot}) // let the hold pass
	}
	r.ok(core.Command{Kind: core.KindP2PTick})
	xfer(12, 11, 5_000, "") // 4: PENDING

	_, pool := migratedDB(t)
	sink := NewSink(pool, Options{})
	ctx := context.Background()
	var first map[string][]string
	for _, size := range []int{1, 3, len(r.recs)} {
		if _, err := pool.Exec(ctx, `TRUNCATE user_balances, balance_changes, p2p_transfers RESTART IDENTITY`); err != nil {
			t.Fatal(err)
		}
		resetTables(t, pool)
		for i := 0; i < len(r.recs); i += size {
			sk := sink
			if size == 1 {
				sk = NewSink(pool, Options{}) // a cold handle cache: handles read from user_balances
			}
			if err := sk.WriteBatch(ctx, r.recs[i:min(i+size, len(r.recs))]); err != nil {
				t.Fatalf("batch size %d at %d: %v", size, i, err)
			}
		}
		got := map[string][]string{
			"users":     queryStrings(t, pool, `SELECT user_id || ':' || id || ':' || balance || ':' || version FROM user_balances ORDER BY id`),
			"changes":   queryStrings(t, pool, `SELECT external_id || ':' || type || ':' || user_id || ':' || amount || ':' || balance_before || ':' || balance_after FROM balance_changes ORDER BY id`),
			"transfers": queryStrings(t, pool, `SELECT id || ':' || from_user_id || ':' || to_user_id || ':' || amount || ':' || status || ':' || coalesce(failure_reason, '-') || ':' || coalesce(request_id, '-') || ':' || (completed_at IS NOT NULL) || ':' || (cancelled_at IS NOT NULL) || ':' || (execute_at - created_at) FROM p2p_transfers ORDER BY id`),
		}
		want := map[string][]string{
			"users": {"alice:11:85000:1", "bob:12:15000:1", "carol:13:500:0"},
			"changes": {"11:charge:alice:100000:0:100000", "13:charge:carol:500:0:500",
				"1:transfer_out:alice:-15000:100000:85000", "1:transfer_in:bob:15000:0:15000"},
			"transfers": {"1:alice:bob:15000:COMPLETED:-:r-1:true:false:00:00:00.005",
				"2:alice:carol:2000:CANCELLED:-:-:false:true:00:00:00.005",
				"3:carol:alice:100:DEBIT_FAILED:ACCOUNT_FROZEN:-:false:false:00:00:00.005",
				"4:bob:alice:5000:PENDING:-:-:false:false:00:00:00.005"},
		}
		for k := range want {
			if !slices.Equal(got[k], want[k]) {
				t.Fatalf("batch size %d: %s:\n got %q\nwant %q", size, k, got[k], want[k])
			}
		}
		if first == nil {
			first = dumpP2P(t, pool)
		} else if d := dumpP2P(t, pool); !reflect.DeepEqual(d, first) {
			t.Fatalf("batch size %d: rows differ from batch size 1", size)
		}
	}
}

func queryStrings(t *testing.T, pool *pgxpool.Pool, sql string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpP2P is every p2p row, times and seqs included.
func dumpP2P(t *testing.T, pool *pgxpool.Pool) map[string][]string {
	t.Helper()
	return map[string][]string{
		"user_balances":   dumpTable(t, pool, "user_balances", "id"),
		"balance_changes": dumpTable(t, pool, "balance_changes", "id"),
		"p2p_transfers":   dumpTable(t, pool, "p2p_transfers", "id"),
	}
}

// TestSinkP2PBalancesFollowEveryChange (issue 39): user_balances follows
// every change of a transfer-service user's balance in its asset — a
// trade, a deposit, an adjustment, a transfer, and a deposit made to its id
// before the user existed (in the initial balance, not counted twice) —
// and ignores other assets and other users, for every batch size.
func TestSinkP2PBalancesFollowEveryChange(t *testing.T) {
	r := newRecorder(t)
	const alice, bob, mm core.UserID = 11, 12, 14
	r.ok(core.Command{Kind: core.KindSpotDeposit, User: bob, Asset: usdt, Amount: 700, Key: key("pre-bob")}) // before bob is a user
	r.ok(core.Command{Kind: core.KindP2PCreateUser, User: alice, Text: "alice", Asset: usdt, Amount: 1_000 * oneUSDT})
	r.ok(core.Command{Kind: core.KindP2PCreateUser, User: bob, Text: "bob", Asset: usdt})
	r.ok(core.Command{Kind: core.KindSpotDeposit, User: mm, Asset: btc, Amount: 10 * oneBTC, Key: key("mm")})
	r.ok(limit(mm, core.Sell, core.GTC, 20_000*oneUSDT, oneBTC/100, ""))   // rests
	r.ok(limit(alice, core.Buy, core.GTC, 20_000*oneUSDT, oneBTC/100, "")) // alice pays 200 USDT + fee
	r.ok(core.Command{Kind: core.KindSpotDeposit, User: alice, Asset: usdt, Amount: 5 * oneUSDT, Key: key("d1")})
	r.ok(core.Command{Kind: core.KindSpotDeposit, User: alice, Asset: btc, Amount: oneBTC, Key: key("d2")}) // another asset
	r.ok(core.Command{Kind: core.KindAdjust, User: bob, Asset: usdt, Amount: 300, Key: key("adj")})
	r.ok(core.Command{Kind: core.KindP2PTransfer, User: alice, OrderID: core.OrderID(bob), Asset: usdt, Amount: 42})
	r.ok(core.Command{Kind: core.KindP2PTick})
	r.ok(limit(alice, core.Buy, core.GTC, 10_000*oneUSDT, oneBTC/100, "")) // rests: a hold, the balance unchanged
	if tr, _ := r.p.P2PTransferByID(1); tr.Status != core.P2PCompleted {
		t.Fatalf("transfer %v", tr.Status)
	}
	want := func(u core.UserID) int64 { b := r.p.BalanceOf(u, usdt); return int64(b.Avail + b.Frozen) }
	_, pool := migratedDB(t)
	ctx := context.Background()
	for _, size := range []int{1, 2, len(r.recs)} {
		resetTables(t, pool)
		if _, err := pool.Exec(ctx, `TRUNCATE user_balances, balance_changes, p2p_transfers RESTART IDENTITY`); err != nil {
			t.Fatal(err)
		}
		sink := NewSink(pool, Options{})
		for i := 0; i < len(r.recs); i += size {
			if err := sink.WriteBatch(ctx, r.recs[i:min(i+size, len(r.recs))]); err != nil {
				t.Fatalf("batch size %d at %d: %v", size, i, err)
			}
		}
		for _, u := range []core.UserID{alice, bob} {
			var bal, version int64
			if err := pool.QueryRow(ctx, `SELECT balance, version FROM user_balances WHERE id = $1`, int64(u)).Scan(&bal, &version); err != nil {
				t.Fatal(err)
			}
			if bal != want(u) {
				t.Fatalf("batch size %d: user %d balance %d, the core's %d", size, u, bal, want(u))
			}
			// alice: the trade, the deposit, the transfer; bob: the adjustment, the transfer
			if wantV := map[core.UserID]int64{alice: 3, bob: 2}[u]; version != wantV {
				t.Fatalf("batch size %d: user %d version %d, want %d", size, u, version, wantV)
			}
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM user_balances`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("user_balances rows %d (%v): only the service's users", n, err)
		}
	}
}
