package persist

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ubscore/ubscore/core"
)

// Prices of the crossing scenario, USDT units per whole BTC.
const (
	px50000 = 50_000 * oneUSDT
	px50100 = 50_100 * oneUSDT
	px51000 = 51_000 * oneUSDT
	px52000 = 52_000 * oneUSDT
	px49000 = 49_000 * oneUSDT
	px49500 = 49_500 * oneUSDT
)

// crossingScenario: seqs 1-3 configure, then
//
//	4  ADJUST      user 1 +1 BTC
//	5  DEPOSIT     user 2 +100,000 USDT
//	6  order 1     user 1 SELL GTC 0.5 @ 50,000 (cid s1)        rests
//	7  order 2     user 2 BUY GTC 0.3 @ 50,100                  trade 1 (0.3 @ 50,000): 2 FILLED at once, 1 partial
//	8  order 3     user 2 BUY IOC 0.4 @ 50,000                  trade 2 (0.2): 1 FILLED, 3 EXPIRED
//	9  order 4     user 1 SELL GTC 0.1 @ 51,000 (cid s4)        rests
//	10 (rejected)  user 1 SELL GTC 0.1 @ 52,000 (cid s4)        DUPLICATE_CLIENT_ORDER_ID, result names order 4
//	11 cancel 4
//	12 order 5     user 2 BUY GTC 0.1 @ 49,000                  rests
//	13 modify 5    -> 0.2 @ 49,500                              re-enters, rests
//	14 order 6     user 1 SELL GTC 0.05 @ 49,000                trade 3 (0.05 @ 49,500): 6 FILLED, 5 partial
func crossingScenario(t testing.TB) *recorder {
	r := newRecorder(t)
	r.ok(core.Command{Kind: core.KindAdjust, User: 1, Asset: btc, Amount: oneBTC, Key: key("fund-1")})
	r.ok(core.Command{Kind: core.KindSpotDeposit, User: 2, Asset: usdt, Amount: 100_000 * oneUSDT, Key: key("dep-2")})
	r.ok(limit(1, core.Sell, core.GTC, px50000, 50_000_000, "s1"))
	r.ok(limit(2, core.Buy, core.GTC, px50100, 30_000_000, ""))
	r.ok(limit(2, core.Buy, core.IOC, px50000, 40_000_000, ""))
	r.ok(limit(1, core.Sell, core.GTC, px51000, 10_000_000, "s4"))
	if res := r.apply(limit(1, core.Sell, core.GTC, px52000, 10_000_000, "s4")); res.Code != core.CodeDuplicateClientOrderID || res.OrderID != 4 {
		t.Fatalf("duplicate cid: %+v", res)
	}
	r.ok(core.Command{Kind: core.KindCancelOrder, User: 1, OrderID: 4})
	r.ok(limit(2, core.Buy, core.GTC, px49000, 10_000_000, ""))
	r.ok(core.Command{Kind: core.KindModifyOrder, User: 2, OrderID: 5, Price: px49500, Qty: 20_000_000})
	r.ok(limit(1, core.Sell, core.GTC, px49000, 5_000_000, ""))
	return r
}

// wantOrder is an orders row as the crossing scenario must leave it.
type wantOrder struct {
	id, user               int64
	side, typ, tif         string
	price, qty, filled     int64
	status                 string
	cid                    *string
	createdSeq, updatedSeq int64
}

func strp(s string) *string { return &s }

var crossingOrders = []wantOrder{
	{1, 1, "SELL", "LIMIT", "GTC", px50000, 50_000_000, 50_000_000, "FILLED", strp("s1"), 6, 8},
	{2, 2, "BUY", "LIMIT", "GTC", px50100, 30_000_000, 30_000_000, "FILLED", nil, 7, 7},
	{3, 2, "BUY", "LIMIT", "IOC", px50000, 40_000_000, 20_000_000, "EXPIRED", nil, 8, 8},
	{4, 1, "SELL", "LIMIT", "GTC", px51000, 10_000_000, 0, "CANCELLED", strp("s4"), 9, 11},
	{5, 2, "BUY", "LIMIT", "GTC", px49500, 20_000_000, 5_000_000, "PARTIALLY_FILLED", nil, 12, 14},
	{6, 1, "SELL", "LIMIT", "GTC", px49000, 5_000_000, 5_000_000, "FILLED", nil, 14, 14},
}

// TestDeriveCrossingScenario checks the pure event -> row mapping (no database).
func TestDeriveCrossingScenario(t *testing.T) {
	r := crossingScenario(t)
	var b batchRows
	b.derive(r.recs)
	if len(b.orders) != len(crossingOrders) {
		t.Fatalf("%d order rows, want %d", len(b.orders), len(crossingOrders))
	}
	for i, w := range crossingOrders {
		o := b.orders[i]
		got := fmt.Sprintf("%d %d %s %s %s %d %d %d %s %d %d new=%v", o.id, o.user, o.side.String(), o.typ.String(),
			o.tif.String(), o.price, o.qty, o.filled, o.status, o.createdSeq, o.updatedSeq, o.isNew)
		want := fmt.Sprintf("%d %d %s %s %s %d %d %d %s %d %d new=true", w.id, w.user, w.side, w.typ, w.tif,
			w.price, w.qty, w.filled, w.status, w.createdSeq, w.updatedSeq)
		if got != want {
			t.Errorf("order row\n got %s\nwant %s", got, want)
		}
	}
	if len(b.trades) != 3 || len(b.events) != 11 {
		t.Fatalf("%d trades, %d audit events", len(b.trades), len(b.events))
	}
	// Deriving the records one at a time gives changes, not new rows, for
	// orders placed earlier: order 1's fill in seq 8 is a delta of 0.2 BTC.
	b.derive(r.recs[7:8])
	if len(b.orders) != 2 || b.orders[0].isNew || b.orders[0].filled != 20_000_000 ||
		b.orders[0].status != core.StatusFilled || b.orders[0].hasPrice || !b.orders[1].isNew {
		t.Fatalf("seq 8 alone: %+v", b.orders)
	}
}

// TestWriteCrossingScenario writes the scenario and checks every table row by row.
func TestWriteCrossingScenario(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	r := crossingScenario(t)
	sink := NewSink(pool, Options{})
	if err := sink.WriteBatch(ctx, r.recs); err != nil {
		t.Fatal(err)
	}
	checkCrossingTables(t, pool, r)
	if got, err := sink.PersistedSeq(ctx); err != nil || got != r.lastSeq() || sink.PersistedSeqCached() != got {
		t.Fatalf("persisted seq %d (cached %d), %v; want %d", got, sink.PersistedSeqCached(), err, r.lastSeq())
	}
	want := dumpAll(t, pool)

	// The same stream in batches of every size gives identical rows: the
	// per-batch collapse of order changes equals applying them one by one.
	for _, size := range []int{1, 2, 3, 5, 7} {
		resetTables(t, pool)
		for i := 0; i < len(r.recs); i += size {
			if err := sink.WriteBatch(ctx, r.recs[i:min(i+size, len(r.recs))]); err != nil {
				t.Fatal(err)
			}
		}
		if got := dumpAll(t, pool); !equalDumps(got, want) {
			t.Fatalf("batch size %d: tables differ from one batch:\n%v\nwant\n%v", size, got, want)
		}
	}
}

func equalDumps(a, b map[string][]string) bool {
	for k := range b {
		if !slices.Equal(a[k], b[k]) {
			return false
		}
	}
	return len(a) == len(b)
}

func checkCrossingTables(t *testing.T, pool *pgxpool.Pool, r *recorder) {
	t.Helper()
	ctx := context.Background()
	// orders
	rows, err := pool.Query(ctx, `SELECT order_id, user_id, side, type, time_in_force, price, quantity,
		filled_quantity, status, client_order_id, created_seq, updated_seq FROM orders ORDER BY order_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (wantOrder, error) {
		var o wantOrder
		err := row.Scan(&o.id, &o.user, &o.side, &o.typ, &o.tif, &o.price, &o.qty, &o.filled, &o.status, &o.cid,
			&o.createdSeq, &o.updatedSeq)
		return o, err
	})
	if err != nil {
		t.Fatal(err)
	}
	show := func(o wantOrder) string {
		cid := "NULL"
		if o.cid != nil {
			cid = *o.cid
		}
		return fmt.Sprintf("%d u%d %s %s %s px=%d qty=%d filled=%d %s cid=%s seq=%d..%d", o.id, o.user, o.side,
			o.typ, o.tif, o.price, o.qty, o.filled, o.status, cid, o.createdSeq, o.updatedSeq)
	}
	if len(got) != len(crossingOrders) {
		t.Fatalf("%d orders rows, want %d", len(got), len(crossingOrders))
	}
	for i := range got {
		if show(got[i]) != show(crossingOrders[i]) {
			t.Errorf("orders row\n got %s\nwant %s", show(got[i]), show(crossingOrders[i]))
		}
	}

	// trades: notional = price * qty / 1e8; fees floor(notional * rate / 1e6).
	wantTrades := []string{
		fmt.Sprintf("1 seq=7 m=1 px=%d qty=30000000 quote=15000000000 maker=1/u1 taker=2/u2 fees=15000000/30000000 BUY", px50000),
		fmt.Sprintf("2 seq=8 m=1 px=%d qty=20000000 quote=10000000000 maker=1/u1 taker=3/u2 fees=10000000/20000000 BUY", px50000),
		fmt.Sprintf("3 seq=14 m=1 px=%d qty=5000000 quote=2475000000 maker=5/u2 taker=6/u1 fees=2475000/4950000 SELL", px49500),
	}
	rows, err = pool.Query(ctx, `SELECT format('%s seq=%s m=%s px=%s qty=%s quote=%s maker=%s/u%s taker=%s/u%s fees=%s/%s %s',
		trade_id, seq, market_id, price, quantity, quote_amount, maker_order_id, maker_user_id, taker_order_id,
		taker_user_id, maker_fee, taker_fee, taker_side) FROM trades ORDER BY trade_id`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || !slices.Equal(got, wantTrades) {
		t.Fatalf("trades %v (%v)\nwant %v", got, err, wantTrades)
	}
	var at time.Time
	if err := pool.QueryRow(ctx, "SELECT time FROM trades WHERE trade_id = 3").Scan(&at); err != nil ||
		!at.Equal(time.Unix(0, testTime+14*1_000_000)) {
		t.Fatalf("trade 3 time %v (%v)", at, err)
	}

	// wal_events: the audit trail in (seq, idx) order.
	wantEvents := []string{
		"6 ORDER_ACCEPTED 1", "7 ORDER_PARTIALLY_FILLED 1", "7 ORDER_MATCHED 2", "8 ORDER_MATCHED 1",
		"8 ORDER_EXPIRED 3", "9 ORDER_ACCEPTED 4", "11 ORDER_CANCELLED 4", "12 ORDER_ACCEPTED 5",
		"13 ORDER_ACCEPTED 5", "14 ORDER_PARTIALLY_FILLED 5", "14 ORDER_MATCHED 6",
	}
	rows, err = pool.Query(ctx, "SELECT format('%s %s %s', seq, event_type, order_id) FROM wal_events ORDER BY seq, idx")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || !slices.Equal(got, wantEvents) {
		t.Fatalf("wal_events %v (%v)\nwant %v", got, err, wantEvents)
	}
	payloads := map[string]string{ // (seq, order) -> payload
		"6/1":  `{"market_id":1,"user_id":1,"order_id":1,"side":"SELL","status":"NEW","book_price":50000000000,"original_price":50000000000,"remaining_qty":50000000,"frozen_amount":50000000,"client_order_id":"s1"}`,
		"7/1":  `{"market_id":1,"user_id":1,"order_id":1,"side":"SELL","fill_qty":30000000,"trade_price":50000000000,"new_remaining_qty":20000000,"counterparty_order_id":2}`,
		"7/2":  `{"market_id":1,"user_id":2,"order_id":2,"side":"BUY","role":"taker","filled_qty":30000000}`,
		"8/1":  `{"market_id":1,"user_id":1,"order_id":1,"side":"SELL","role":"maker","fill_qty":20000000,"trade_price":50000000000,"counterparty_order_id":3}`,
		"8/3":  `{"market_id":1,"user_id":2,"order_id":3,"side":"BUY","expired_qty":20000000,"filled_qty":20000000}`,
		"11/4": `{"market_id":1,"user_id":1,"order_id":4,"side":"SELL","reason":"OK","remaining_qty":10000000,"frozen_amount":10000000}`,
	}
	for k, want := range payloads {
		var seq, order int64
		fmt.Sscanf(k, "%d/%d", &seq, &order)
		var equal bool
		if err := pool.QueryRow(ctx, "SELECT payload::jsonb = $3::jsonb FROM wal_events WHERE seq = $1 AND order_id = $2",
			seq, order, want).Scan(&equal); err != nil || !equal {
			var got string
			_ = pool.QueryRow(ctx, "SELECT payload::text FROM wal_events WHERE seq = $1 AND order_id = $2", seq, order).Scan(&got)
			t.Errorf("payload %s: %s (%v)\nwant %s", k, got, err, want)
		}
	}

	// spot_ledger: seq 7 in full (freeze, trade 1 settlement, release of the
	// taker's unused fee reserve), then the sums against the processor.
	freeze := int64(15_030_000_000 + 30_060_000) // notional at the limit + worst-case (taker) fee
	wantLedger := []string{
		fmt.Sprintf("7/0 u2 a1 %d/%d PLACE_ORDER ref=2 trade=", -freeze, freeze),
		"7/2 u2 a1 0/-15030000000 PLACE_ORDER ref=2 trade=1", // buyer pays notional + taker fee
		"7/3 u2 a2 30000000/0 PLACE_ORDER ref=2 trade=1",
		"7/4 u1 a2 0/-30000000 PLACE_ORDER ref=2 trade=1",
		"7/5 u1 a1 14985000000/0 PLACE_ORDER ref=2 trade=1", // seller gets notional - maker fee
		"7/6 u0 a1 45000000/0 PLACE_ORDER ref=2 trade=1",    // both fees
		"7/9 u2 a1 30060000/-30060000 PLACE_ORDER ref=2 trade=",
	}
	rows, err = pool.Query(ctx, `SELECT format('%s/%s u%s a%s %s/%s %s ref=%s trade=%s', seq, idx, user_id, asset_id,
		d_available, d_frozen, cause, ref, trade_id) FROM spot_ledger WHERE seq = 7 ORDER BY idx`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || !slices.Equal(got, wantLedger) {
		t.Fatalf("spot_ledger seq 7:\n%v (%v)\nwant\n%v", got, err, wantLedger)
	}
	var cause, ref string
	if err := pool.QueryRow(ctx, "SELECT cause, ref FROM spot_ledger WHERE seq = 5").Scan(&cause, &ref); err != nil ||
		cause != "SPOT_DEPOSIT" || ref != "dep-2" {
		t.Fatalf("deposit ledger row: %s %s %v", cause, ref, err)
	}
	checkLedgerSums(t, pool, r, 2)
}
