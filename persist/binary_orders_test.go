package persist

// This file proves that binary orders are recorded as placed (issue 40 item
// 5, spec 004 §4.3 and Appendix B): an orders row keeps the order's own
// side and price (its outcome's terms) through every later event, and
// carries its book terms, frozen asset type, remaining quantity and hold,
// equal to the core's resting order; the audit payloads state the order
// both ways. Written in one batch or one record per batch (the update path),
// the rows are the same.

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ubscore/ubscore/core"
)

// binaryOrdersScenario: market 7 in USDT (payout 1 USDT = 1_000_000); the
// order ids in the comments.
func binaryOrdersScenario(t testing.TB) *recorder {
	r := newRecorder(t)
	for u := core.UserID(1); u <= 4; u++ {
		r.ok(core.Command{Kind: core.KindSpotDeposit, User: u, Asset: usdt, Amount: 1_000 * oneUSDT, Key: key("o" + string(rune('0'+u)))})
	}
	r.ok(core.Command{Kind: core.KindConfigBinary, Market: 7, Cfg: core.MarketCfg{Quote: usdt, Lot: 1, MinQty: 1,
		MaxQty: 10_000, MakerFee: 1_000, TakerFee: 2_000}, Text: "Seven?"})
	r.ok(core.Command{Kind: core.KindActivate, Market: 7})
	r.ok(bOrder(1, 7, core.Buy, core.OutcomeNo, 300_000, 10)) // 1: rests as book SELL @0.70
	r.ok(bOrder(2, 7, core.Buy, core.OutcomeNo, 550_000, 10)) // 2: rests as book SELL @0.45
	r.ok(bOrder(3, 7, core.Buy, core.OutcomeYes, 450_000, 4)) // 3: mints 4 against 2 (2 partly filled)
	r.ok(bOrder(2, 7, core.Sell, core.OutcomeNo, 600_000, 2)) // 4: rests as book BUY @0.40 (shares)
	r.ok(bOrder(4, 7, core.Buy, core.OutcomeYes, 400_000, 3)) // 5: rests as book BUY @0.40 behind 4
	r.ok(bOrder(3, 7, core.Buy, core.OutcomeNo, 600_000, 8))  // 6: a NO taker: book SELL @0.40, takes 4 and 5, 3 rest
	r.ok(bOrder(4, 7, core.Buy, core.OutcomeYes, 200_000, 1)) // 7: rests, then cancelled
	r.ok(core.Command{Kind: core.KindCancelOrder, User: 4, Market: 7, OrderID: 7})
	return r
}

func TestSinkBinaryOrdersAsPlaced(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	r := binaryOrdersScenario(t)
	sink := NewSink(pool, Options{})
	check := func(name string) {
		t.Helper()
		// Every binary row against the command that placed it and, while it
		// rests, the core's order.
		type row struct {
			side, outcome, bookType, bookDir, frozenType, status string
			price, bookPrice, remaining, frozen, qty, filled     int64
		}
		rows, err := pool.Query(ctx, `SELECT order_id, side, price, outcome, book_type, book_direction, book_price,
			frozen_asset_type, remaining_quantity, frozen_amount, quantity, filled_quantity, status FROM orders
			WHERE market_id = 7 ORDER BY order_id`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[core.OrderID]row{}
		for rows.Next() {
			var id int64
			var w row
			if err := rows.Scan(&id, &w.side, &w.price, &w.outcome, &w.bookType, &w.bookDir, &w.bookPrice,
				&w.frozenType, &w.remaining, &w.frozen, &w.qty, &w.filled, &w.status); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got[core.OrderID(id)] = w
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != 7 {
			t.Fatalf("%s: %d binary rows, want 7", name, len(got))
		}
		// the three NO orders of the issue, as placed
		for id, want := range map[core.OrderID]row{
			1: {side: "BUY", price: 300_000, outcome: "NO", bookType: "SYNTHETIC_SELL", bookDir: "SELL", bookPrice: 700_000,
				frozenType: "FUNDS", status: "NEW", remaining: 10},
			2: {side: "BUY", price: 550_000, outcome: "NO", bookType: "SYNTHETIC_SELL", bookDir: "SELL", bookPrice: 450_000,
				frozenType: "FUNDS", status: "PARTIALLY_FILLED", remaining: 6},
			3: {side: "BUY", price: 450_000, outcome: "YES", bookType: "NATIVE_BUY", bookDir: "BUY", bookPrice: 450_000,
				frozenType: "FUNDS", status: "FILLED"},
			4: {side: "SELL", price: 600_000, outcome: "NO", bookType: "SYNTHETIC_BUY", bookDir: "BUY", bookPrice: 400_000,
				frozenType: "SHARES", status: "FILLED"},
			5: {side: "BUY", price: 400_000, outcome: "YES", bookType: "NATIVE_BUY", bookDir: "BUY", bookPrice: 400_000,
				frozenType: "FUNDS", status: "FILLED"},
			6: {side: "BUY", price: 600_000, outcome: "NO", bookType: "SYNTHETIC_SELL", bookDir: "SELL", bookPrice: 400_000,
				frozenType: "FUNDS", status: "PARTIALLY_FILLED", remaining: 3},
			7: {side: "BUY", price: 200_000, outcome: "YES", bookType: "NATIVE_BUY", bookDir: "BUY", bookPrice: 200_000,
				frozenType: "FUNDS", status: "CANCELLED", remaining: 1},
		} {
			g := got[id]
			if g.side != want.side || g.price != want.price || g.outcome != want.outcome || g.bookType != want.bookType ||
				g.bookDir != want.bookDir || g.bookPrice != want.bookPrice || g.frozenType != want.frozenType ||
				g.status != want.status || g.remaining != want.remaining {
				t.Errorf("%s: order %d row %+v, want %+v", name, id, g, want)
			}
		}
		for id, g := range got {
			if g.remaining != g.qty-g.filled {
				t.Errorf("%s: order %d remaining %d of %d filled %d", name, id, g.remaining, g.qty, g.filled)
			}
			o, live := r.p.Order(id)
			if !live {
				if g.frozen != 0 || g.status == "NEW" || g.status == "PARTIALLY_FILLED" {
					t.Errorf("%s: closed order %d: %s holding %d", name, id, g.status, g.frozen)
				}
				continue
			}
			if g.bookDir != o.Side.String() || g.bookPrice != int64(o.Price) || g.remaining != int64(o.Qty-o.Filled) ||
				g.frozen != int64(o.Frozen) || g.filled != int64(o.Filled) {
				t.Errorf("%s: order %d row %+v, core %+v", name, id, g, o)
			}
		}
		// ORDER_ACCEPTED of BUY NO @0.30: its own price (spec 004 §4.3)
		var payload string
		if err := pool.QueryRow(ctx, `SELECT payload::text FROM wal_events WHERE order_id = 1
			AND event_type = 'ORDER_ACCEPTED'`).Scan(&payload); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var p map[string]any
		if err := json.Unmarshal([]byte(payload), &p); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]any{"original_price": 300_000.0, "price": 300_000.0, "side": "BUY",
			"outcome": "NO", "book_type": "SYNTHETIC_SELL", "book_direction": "SELL", "book_price": 700_000.0,
			"frozen_asset_type": "FUNDS", "remaining_qty": 10.0} {
			if p[k] != want {
				t.Errorf("%s: ORDER_ACCEPTED of order 1: %s = %v, want %v (%s)", name, k, p[k], want, payload)
			}
		}
		// every binary audit row states the order both ways
		if n := queryInt(t, pool, `SELECT count(*) FROM wal_events e JOIN orders o USING (order_id)
			WHERE o.market_id = 7 AND NOT ((e.payload->>'price')::bigint = o.price AND e.payload->>'side' = o.side
			AND (e.payload->>'book_price')::bigint = o.book_price AND e.payload->>'book_type' = o.book_type
			AND e.payload->>'frozen_asset_type' = o.frozen_asset_type
			AND e.payload::jsonb ? 'remaining_qty' AND e.payload::jsonb ? 'frozen_amount')`); n != 0 {
			t.Errorf("%s: %d binary audit rows disagree with their order", name, n)
		}
		// trades from each party's side: the mint of 2 (BUY NO @0.55) and 3 (BUY YES @0.45)
		var mOut, mSide string
		var mPrice, tPrice int64
		if err := pool.QueryRow(ctx, `SELECT maker_outcome, maker_side, maker_price, taker_price FROM trades
			WHERE maker_order_id = 2 AND taker_order_id = 3`).Scan(&mOut, &mSide, &mPrice, &tPrice); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if mOut != "NO" || mSide != "BUY" || mPrice != 550_000 || tPrice != 450_000 {
			t.Errorf("%s: mint trade maker %s %s @%d, taker @%d", name, mOut, mSide, mPrice, tPrice)
		}
	}
	if err := sink.WriteBatch(ctx, r.recs); err != nil {
		t.Fatal(err)
	}
	check("one batch")
	want := dumpAll(t, pool)
	resetTables(t, pool)
	for i := range r.recs {
		if err := sink.WriteBatch(ctx, r.recs[i:i+1]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	check("a batch per record")
	if got := dumpAll(t, pool); !equalDumps(got, want) {
		t.Fatalf("batches per record differ:\n got %v\nwant %v", got, want)
	}
}

// TestSinkResetRebuildsBinaryOrders: binary order rows written before
// migration 0060 (no book terms, the book price over the order's own) are
// rebuilt whole by the documented reset (ResetReadModelSQL) and a sink that
// starts again from the WAL.
func TestSinkResetRebuildsBinaryOrders(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	r := binaryOrdersScenario(t)
	if err := NewSink(pool, Options{}).WriteBatch(ctx, r.recs); err != nil {
		t.Fatal(err)
	}
	want := dumpAll(t, pool)
	// the rows as the sink wrote them before 0060
	if _, err := pool.Exec(ctx, `UPDATE orders SET price = book_price, outcome = NULL, book_type = NULL,
		book_direction = NULL, book_price = NULL, frozen_asset_type = NULL, frozen_amount = NULL
		WHERE outcome IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, ResetReadModelSQL); err != nil {
		t.Fatal(err)
	}
	sink := NewSink(pool, Options{})
	if err := sink.WriteBatch(ctx, r.recs); err != nil {
		t.Fatal(err)
	}
	got := dumpAll(t, pool)
	delete(got, "binary") // binary_markets: its bigserial id goes on from where it was
	delete(want, "binary")
	if !equalDumps(got, want) {
		t.Fatalf("after the reset:\n got %v\nwant %v", got, want)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders WHERE market_id = 7 AND outcome IS NOT NULL`); n != 7 {
		t.Fatalf("%d binary rows with their terms after the reset", n)
	}
}
