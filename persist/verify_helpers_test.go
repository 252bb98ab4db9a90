package persist

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ubscore/ubscore/core"
)

// checkLedgerSums requires sum(d_available), sum(d_frozen) of spot_ledger to
// equal the processor's balance for every (user, asset) in the ledger and
// for every user 0..users in both assets.
func checkLedgerSums(t *testing.T, pool *pgxpool.Pool, r *recorder, users int) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT user_id, asset_id, sum(d_available)::bigint, sum(d_frozen)::bigint
		FROM spot_ledger GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	type ua struct {
		u core.UserID
		a core.AssetID
	}
	sums := map[ua]core.Balance{}
	for rows.Next() {
		var u, av, fr int64
		var a int32
		if err := rows.Scan(&u, &a, &av, &fr); err != nil {
			t.Fatal(err)
		}
		sums[ua{core.UserID(u), core.AssetID(a)}] = core.Balance{Avail: core.Units(av), Frozen: core.Units(fr)}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for k, got := range sums {
		if want := r.p.BalanceOf(k.u, k.a); got != want {
			t.Errorf("user %d asset %d: spot_ledger sums %+v, processor %+v", k.u, k.a, got, want)
		}
	}
	for u := 0; u <= users; u++ {
		for _, a := range []core.AssetID{usdt, btc} {
			if got, want := sums[ua{core.UserID(u), a}], r.p.BalanceOf(core.UserID(u), a); got != want {
				t.Errorf("user %d asset %d: spot_ledger sums %+v, processor %+v", u, a, got, want)
			}
		}
	}
}

// checkAgainstProcessor requires the tables to agree with the recorder's
// processor and stream: checkpoint, row counts, balances, resting orders,
// and every order's filled quantity equal to the sum of its trades.
func checkAgainstProcessor(t *testing.T, pool *pgxpool.Pool, r *recorder, users int) {
	t.Helper()
	want := r.counts()
	if got := queryInt(t, pool, "SELECT persisted_seq FROM core_checkpoint WHERE id = 1"); got != int64(r.lastSeq()) {
		t.Fatalf("persisted_seq %d, want %d", got, r.lastSeq())
	}
	for _, c := range []struct {
		sql  string
		want int64
	}{
		{"SELECT count(*) FROM trades", int64(want.trades)},
		{"SELECT coalesce(sum(quantity), 0)::bigint FROM trades", want.tradeQty},
		{"SELECT count(*) FROM spot_ledger", int64(want.ledger)},
		// (seq, idx) is unique by construction (no primary key: see 0004)
		{"SELECT count(*) FROM (SELECT 1 FROM spot_ledger GROUP BY seq, idx HAVING count(*) > 1) d", 0},
		{"SELECT count(*) FROM wal_events", int64(want.audit)},
		{"SELECT count(*) FROM orders", int64(want.placed)},
		// every order's fills are exactly its trades
		{`SELECT count(*) FROM orders o WHERE filled_quantity <> (SELECT coalesce(sum(quantity), 0) FROM trades
			WHERE maker_order_id = o.order_id OR taker_order_id = o.order_id)`, 0},
		// a FILLED order with a base quantity filled all of it; closed-early ones did not
		{"SELECT count(*) FROM orders WHERE status = 'FILLED' AND quantity > 0 AND filled_quantity <> quantity", 0},
		{"SELECT count(*) FROM orders WHERE status IN ('CANCELLED', 'EXPIRED') AND quantity > 0 AND filled_quantity >= quantity", 0},
		{"SELECT count(*) FROM orders WHERE status = 'PARTIALLY_FILLED' AND (filled_quantity = 0 OR filled_quantity >= quantity)", 0},
	} {
		if got := queryInt(t, pool, c.sql); got != c.want {
			t.Errorf("%s = %d, want %d", c.sql, got, c.want)
		}
	}
	if want.trades == 0 || want.placed == 0 {
		t.Fatalf("stream too tame: %+v", want)
	}
	checkLedgerSums(t, pool, r, users)

	// Resting orders are exactly the rows with an open status, field by field.
	resting := r.p.OpenOrders(btcUSDT, 0, nil)
	if got := queryInt(t, pool, "SELECT count(*) FROM orders WHERE status IN ('NEW', 'PARTIALLY_FILLED')"); got != int64(len(resting)) {
		t.Errorf("%d open orders rows, processor has %d resting", got, len(resting))
	}
	for _, o := range resting {
		var user, price, qty, filled int64
		var status string
		if err := pool.QueryRow(context.Background(), `SELECT user_id, price, quantity, filled_quantity, status
			FROM orders WHERE order_id = $1`, int64(o.ID)).Scan(&user, &price, &qty, &filled, &status); err != nil {
			t.Fatalf("resting order %d: %v", o.ID, err)
		}
		wantStatus := "NEW"
		if o.Filled > 0 {
			wantStatus = "PARTIALLY_FILLED"
		}
		if user != int64(o.User) || price != int64(o.Price) || qty != int64(o.Qty) || filled != int64(o.Filled) ||
			status != wantStatus {
			t.Errorf("order %d: row u%d px=%d qty=%d filled=%d %s, processor %+v", o.ID, user, price, qty, filled,
				status, o)
		}
	}
}
