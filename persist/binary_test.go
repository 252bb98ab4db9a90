package persist

// This file proves the sink's binary-market tables (migrations 0040, 0041): after
// a scenario with all four fill kinds, a resolution, settlement slices, a
// void, an archive and the reuse of the archived id, binary_markets holds
// each market's config (its question included), status and outcome, positions holds exactly the
// core's positions, trades carry their fill kinds, audit payloads carry the
// book terms; written whole or in overlapping, replayed batches, the rows
// are the same.

import (
	"context"
	"testing"

	"github.com/ubscore/ubscore/core"
)

func bOrder(u core.UserID, m core.MarketID, side core.Side, out core.Outcome, price core.Price, qty core.Units) core.Command {
	return core.Command{Kind: core.KindPlaceOrder, User: u, Market: m, Side: side, Type: core.Limit, TIF: core.GTC,
		Price: price, Qty: qty, Flags: uint8(out)}
}

// binaryQuestions are the questions the scenario's first configs ask; the
// second config of market 8 (after its archive) has none, as a WAL record
// from before questions.
var binaryQuestions = map[core.MarketID]string{7: `Will "BTC" close ≥ 100 000 € on 31/12?`, 8: "Eight?"}

// binaryScenario: USDT (scale 6, payout 1 USDT = 1_000_000, tick 10_000).
func binaryScenario(t testing.TB) *recorder {
	r := newRecorder(t)
	for u := core.UserID(1); u <= 4; u++ {
		r.ok(core.Command{Kind: core.KindSpotDeposit, User: u, Asset: usdt, Amount: 1_000 * oneUSDT, Key: key("b" + string(rune('0'+u)))})
	}
	for _, m := range []core.MarketID{7, 8} {
		r.ok(core.Command{Kind: core.KindConfigBinary, Market: m, Cfg: core.MarketCfg{Quote: usdt, Lot: 1, MinQty: 1,
			MaxQty: 10_000, MakerFee: 1_000, TakerFee: 2_000}, Price: core.Price(testTime + 1_000_000_000_000),
			Text: binaryQuestions[m]})
		r.ok(core.Command{Kind: core.KindActivate, Market: m})
	}
	// market 7: MINT, TRANSFER_YES, TRANSFER_NO, BURN
	r.ok(bOrder(1, 7, core.Buy, core.OutcomeYes, 600_000, 100))
	r.ok(bOrder(2, 7, core.Buy, core.OutcomeNo, 400_000, 100))
	r.ok(bOrder(1, 7, core.Sell, core.OutcomeYes, 650_000, 40))
	r.ok(bOrder(3, 7, core.Buy, core.OutcomeYes, 700_000, 40))
	r.ok(bOrder(2, 7, core.Sell, core.OutcomeNo, 450_000, 30))
	r.ok(bOrder(4, 7, core.Buy, core.OutcomeNo, 450_000, 30))
	r.ok(bOrder(1, 7, core.Sell, core.OutcomeYes, 500_000, 60))
	r.ok(bOrder(2, 7, core.Sell, core.OutcomeNo, 500_000, 70)) // burns 60, 10 rest
	r.ok(core.Command{Kind: core.KindSuspendMarket, Market: 7})
	r.ok(core.Command{Kind: core.KindResolve, Market: 7, Flags: uint8(core.OutcomeYes)})
	r.ok(core.Command{Kind: core.KindSettle, Market: 7, Qty: 2})
	r.ok(core.Command{Kind: core.KindSettle, Market: 7, Qty: 10})
	// market 8: a mint, then voided and settled, archived, and its id configured again
	r.ok(bOrder(3, 8, core.Buy, core.OutcomeYes, 300_000, 10))
	r.ok(bOrder(4, 8, core.Buy, core.OutcomeNo, 700_000, 10))
	r.ok(core.Command{Kind: core.KindVoid, Market: 8})
	r.ok(core.Command{Kind: core.KindSettle, Market: 8, Qty: 10})
	r.ok(core.Command{Kind: core.KindArchive, Market: 8})
	r.ok(core.Command{Kind: core.KindConfigBinary, Market: 8, Amount: 2 * oneUSDT, Cfg: core.MarketCfg{Quote: usdt,
		Lot: 1, MinQty: 1, MaxQty: 10_000}})
	r.ok(core.Command{Kind: core.KindActivate, Market: 8})
	r.ok(bOrder(1, 8, core.Buy, core.OutcomeYes, 1_000_000, 5))
	r.ok(bOrder(2, 8, core.Buy, core.OutcomeNo, 1_000_000, 5))
	r.ok(bOrder(1, 8, core.Sell, core.OutcomeYes, 1_500_000, 2)) // rests: pending sell
	return r
}

func TestSinkBinaryMarkets(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	r := binaryScenario(t)
	sink := NewSink(pool, Options{})
	if err := sink.WriteBatch(ctx, r.recs); err != nil {
		t.Fatal(err)
	}
	// positions == the core's, for every user of every live binary market
	n := queryInt(t, pool, "SELECT count(*) FROM positions")
	var want int64
	for _, m := range []core.MarketID{7, 8} {
		for u := core.UserID(1); u <= 4; u++ {
			v, ok := r.p.Position(u, m)
			if !ok {
				continue
			}
			want++
			var yes, no, yc, nc, yp, np int64
			if err := pool.QueryRow(ctx, `SELECT yes_volume, no_volume, yes_cost_sum, no_cost_sum, yes_pending_sell,
				no_pending_sell FROM positions WHERE market_id = $1 AND user_id = $2`, int32(m), int64(u)).Scan(&yes, &no,
				&yc, &nc, &yp, &np); err != nil {
				t.Fatalf("position %d/%d: %v", m, u, err)
			}
			got := core.PositionView{Market: m, User: u, YesVolume: core.Units(yes), NoVolume: core.Units(no),
				YesCostSum: core.Units(yc), NoCostSum: core.Units(nc), YesPending: core.Units(yp), NoPending: core.Units(np)}
			if got != v {
				t.Errorf("position %d/%d: row %+v, core %+v", m, u, got, v)
			}
		}
	}
	// market 7 (settled): its positions are rows of zeros, one per user who traded
	if z := queryInt(t, pool, `SELECT count(*) FROM positions WHERE market_id = 7 AND yes_volume = 0 AND no_volume = 0
		AND yes_cost_sum = 0 AND no_cost_sum = 0`); z != 4 || n != want+4 {
		t.Errorf("%d zeroed market-7 positions, %d rows, core %d live", z, n, want)
	}
	var status, outcome string
	var settled bool
	var pnl int64
	if err := pool.QueryRow(ctx, `SELECT status, outcome, settled, pnl_paid FROM binary_markets WHERE market_id = 7`).Scan(
		&status, &outcome, &settled, &pnl); err != nil {
		t.Fatal(err)
	}
	if status != "SETTLED" || outcome != "YES" || !settled || pnl == 0 || pnl != queryInt(t, pool,
		`SELECT sum(maker_fee + taker_fee) FROM trades WHERE market_id = 7`) {
		t.Errorf("market 7: %s %s settled=%v pnl=%d", status, outcome, settled, pnl)
	}
	if s := queryInt(t, pool, `SELECT count(*) FROM binary_markets WHERE market_id = 8 AND status = 'ARCHIVED'
		AND archived_seq IS NOT NULL`); s != 1 {
		t.Errorf("%d archived market-8 rows", s)
	}
	if p := queryInt(t, pool, `SELECT payout FROM binary_markets WHERE market_id = 8 AND archived_seq IS NULL
		AND status = 'ACTIVE'`); p != 2*oneUSDT {
		t.Errorf("live market 8 payout %d", p)
	}
	for _, q := range []struct {
		where string
		want  *string
	}{{"market_id = 7", ptr(binaryQuestions[7])}, {"market_id = 8 AND archived_seq IS NOT NULL", ptr(binaryQuestions[8])},
		{"market_id = 8 AND archived_seq IS NULL", nil}} {
		var got *string
		if err := pool.QueryRow(ctx, `SELECT question FROM binary_markets WHERE `+q.where).Scan(&got); err != nil {
			t.Fatalf("question of %s: %v", q.where, err)
		}
		if (got == nil) != (q.want == nil) || (got != nil && *got != *q.want) {
			t.Errorf("question of %s: %v, want %v", q.where, deref(got), deref(q.want))
		}
	}
	if p := queryInt(t, pool, `SELECT payout FROM binary_markets WHERE market_id = 7`); p != oneUSDT {
		t.Errorf("market 7 payout %d (the default: one USDT)", p)
	}
	for kind, want := range map[string]int64{"MINT": 3, "TRANSFER_YES": 1, "TRANSFER_NO": 1, "BURN": 1} {
		if got := queryInt(t, pool, `SELECT count(*) FROM trades WHERE fill_kind = $1`, kind); got != want {
			t.Errorf("%d %s trades, want %d", got, kind, want)
		}
	}
	if got := queryInt(t, pool, `SELECT count(*) FROM wal_events WHERE payload->>'book_type' LIKE 'SYNTHETIC_%'
		AND payload->>'outcome' = 'NO'`); got == 0 {
		t.Error("no audit event carries the NO orders' book terms")
	}
	// Replayed and overlapping batches leave the same rows.
	wantRows := dumpAll(t, pool)
	resetTables(t, pool)
	k := len(r.recs)
	for _, s := range [][2]int{{0, 9}, {4, 20}, {20, 21}, {15, k}, {0, k}} {
		if err := sink.WriteBatch(ctx, r.recs[s[0]:s[1]]); err != nil {
			t.Fatalf("batch %v: %v", s, err)
		}
	}
	if got := dumpAll(t, pool); !equalDumps(got, wantRows) {
		t.Fatalf("replayed batches differ:\n got %v\nwant %v", got, wantRows)
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return `"` + *s + `"`
}
