package persist

// This file proves the sink's part of spec 004: the audit events and their
// payloads as §4.2 writes them (ORDER_EXPIRED only after a fill, a separate
// ORDER_UNFILLED otherwise), the audit retention of §4.4, the
// circuit_breaker_events rows of §5.4 derived from the WAL (trip, context,
// resolution by whom with which note), and the sink gaps of a released
// follower.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/core"
)

// TestSpec4_AuditEventTypesAndPayloads: an IOC filled partly expires as
// ORDER_EXPIRED {expired_qty, filled_qty}; IOC and market remainders with
// no fill are ORDER_UNFILLED; the types pass the table's CHECK.
func TestSpec4_AuditEventTypesAndPayloads(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	r := newRecorder(t)
	r.ok(core.Command{Kind: core.KindAdjust, User: 1, Asset: btc, Amount: oneBTC, Key: key("f1")})
	r.ok(core.Command{Kind: core.KindAdjust, User: 2, Asset: usdt, Amount: 100_000 * oneUSDT, Key: key("f2")})
	r.ok(limit(1, core.Sell, core.GTC, px50000, 10_000_000, "")) // 6: order 1 rests 0.1
	r.ok(limit(2, core.Buy, core.IOC, px50000, 30_000_000, ""))  // 7: order 2 fills 0.1, 0.2 expires
	r.ok(limit(1, core.Sell, core.GTC, px51000, 10_000_000, "")) // 8: order 3 rests
	r.ok(limit(2, core.Buy, core.IOC, px50100, 10_000_000, ""))  // 9: order 4 crosses nothing
	if res := r.apply(core.Command{Kind: core.KindPlaceOrder, User: 1, Market: btcUSDT, Side: core.Sell, Type: core.Market,
		Qty: 10_000}); res.Code != core.CodeNoLiquidity { // a market order needs liquidity: never an unfilled remainder
		t.Fatal(res.Code)
	}
	if err := NewSink(pool, Options{}).WriteBatch(ctx, r.recs); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, "SELECT format('%s %s %s', seq, event_type, order_id) FROM wal_events ORDER BY seq, idx")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	want := []string{"6 ORDER_ACCEPTED 1", "7 ORDER_MATCHED 1", "7 ORDER_EXPIRED 2", "8 ORDER_ACCEPTED 3", "9 ORDER_UNFILLED 4"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("wal_events %v (%v), want %v", got, err, want)
	}
	for seq, want := range map[int]string{
		7: `{"market_id":1,"user_id":2,"order_id":2,"side":"BUY","expired_qty":20000000,"filled_qty":10000000}`,
		9: `{"market_id":1,"user_id":2,"order_id":4,"side":"BUY","expired_qty":10000000,"filled_qty":0}`,
	} {
		var equal bool
		if err := pool.QueryRow(ctx, `SELECT payload::jsonb = $2::jsonb FROM wal_events WHERE seq = $1
			AND event_type IN ('ORDER_EXPIRED', 'ORDER_UNFILLED')`, seq, want).Scan(&equal); err != nil || !equal {
			t.Errorf("seq %d payload: want %s (%v)", seq, want, err)
		}
	}
}

// TestSpec4_AuditRetention: rows older than the cutoff go, in batches; the
// newer ones and every other table stay.
func TestSpec4_AuditRetention(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	r := crossingScenario(t)
	if err := NewSink(pool, Options{}).WriteBatch(ctx, r.recs); err != nil {
		t.Fatal(err)
	}
	before := dumpAll(t, pool)
	cutoff := time.Unix(0, testTime+10*1_000_000) // the 6 events of seqs 6..9 are older
	n, err := PruneAudit(ctx, pool, cutoff, 2)
	if err != nil || n != 6 {
		t.Fatalf("pruned %d (%v), want the 6 events of seqs 6..9", n, err)
	}
	if left := queryInt(t, pool, "SELECT count(*) FROM wal_events WHERE time < $1", cutoff); left != 0 {
		t.Fatalf("%d old rows left", left)
	}
	after := dumpAll(t, pool)
	if len(after["wal_events"]) != len(before["wal_events"])-6 {
		t.Fatalf("wal_events %d -> %d", len(before["wal_events"]), len(after["wal_events"]))
	}
	for _, tbl := range []string{"orders", "trades", "spot_ledger", "breakers"} {
		if !slices.Equal(before[tbl], after[tbl]) {
			t.Fatalf("%s changed", tbl)
		}
	}
	if n, err := PruneAudit(ctx, pool, cutoff, 2); err != nil || n != 0 {
		t.Fatalf("second prune %d %v", n, err)
	}
}

// breakerRowJSON is one circuit_breaker_events row as the tests compare it.
type breakerRowJSON struct {
	Market   string          `json:"market_id"`
	Reason   string          `json:"trigger_reason"`
	Context  json.RawMessage `json:"context"`
	By       *string         `json:"resolved_by"`
	Note     *string         `json:"resolution_note"`
	Status   *string         `json:"resolved_status"`
	Seq      int64           `json:"trigger_seq"`
	Resolved *int64          `json:"resolved_seq"`
}

// TestSpec5_BreakerEventsFromTheWAL: every trip is a row with its reason
// and context (who halted manually, what a per-command check or the
// periodic check found); a resolution fills who, when and the note; a core
// halt is market '*'; rows are the same whatever the batch boundaries.
func TestSpec5_BreakerEventsFromTheWAL(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	r := newRecorderCfg(t, core.Config{AllowFaults: true})
	r.ok(core.Command{Kind: core.KindAdjust, User: 1, Asset: btc, Amount: oneBTC, Key: key("f1")})
	r.ok(limit(1, core.Sell, core.GTC, px50000, 10_000_000, ""))
	r.ok(core.Command{Kind: core.KindHaltMarket, Market: btcUSDT, User: 1000})                             // 6
	r.ok(core.Command{Kind: core.KindResumeMarket, Market: btcUSDT, User: 1000, Text: "checked the book"}) // 7
	check := `{"phase":"periodic","checked_seq":7,"violations":[{"market":1,"detail":"BOOK_INDEX"}]}`
	r.ok(core.Command{Kind: core.KindBreakerTrip, Market: btcUSDT, Flags: uint8(core.ReasonOrderbookDesync), Text: check}) // 8
	r.ok(core.Command{Kind: core.KindResumeMarket, Market: btcUSDT, Flags: uint8(core.MarketSuspended), User: 1001})       // 9
	r.ok(core.Command{Kind: core.KindFault, Flags: uint8(core.FaultStrayFrozen), User: 1, Asset: btc, Amount: 5})          // 10
	r.ok(core.Command{Kind: core.KindTick, Flags: core.TickFullCheck})                                                     // 11
	sink := NewSink(pool, Options{})
	if err := sink.WriteBatch(ctx, r.recs); err != nil {
		t.Fatal(err)
	}
	want := dumpAll(t, pool)
	var got []breakerRowJSON
	for _, row := range want["breakers"] {
		var b breakerRowJSON
		if err := json.Unmarshal([]byte(row), &b); err != nil {
			t.Fatal(err)
		}
		got = append(got, b)
	}
	if len(got) != 3 {
		t.Fatalf("rows %v", want["breakers"])
	}
	str := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	ctxOf := func(b breakerRowJSON) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(b.Context, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if b := got[0]; b.Market != "1" || b.Reason != "MANUAL_HALT" || b.Seq != 6 || str(b.By) != "1000" ||
		str(b.Note) != "checked the book" || str(b.Status) != "ACTIVE" || ctxOf(b)["by_user"] != 1000.0 {
		t.Errorf("manual halt row %+v ctx %s", b, b.Context)
	}
	if b := got[1]; b.Market != "1" || b.Reason != "ORDERBOOK_DESYNC" || str(b.By) != "1001" || str(b.Note) != "NULL" ||
		str(b.Status) != "SUSPENDED" || !strings.Contains(string(b.Context), `"phase": "periodic"`) {
		t.Errorf("periodic trip row %+v ctx %s", b, b.Context)
	}
	if b := got[2]; b.Market != "*" || b.Reason != "INVARIANT_BALANCE" || b.Resolved != nil ||
		!strings.Contains(string(b.Context), "FROZEN_MISMATCH") || ctxOf(b)["command"] != "TICK" {
		t.Errorf("core halt row %+v ctx %s", b, b.Context)
	}
	for _, size := range []int{1, 3} {
		resetTables(t, pool)
		for i := 0; i < len(r.recs); i += size {
			if err := sink.WriteBatch(ctx, r.recs[i:min(i+size, len(r.recs))]); err != nil {
				t.Fatal(err)
			}
		}
		if got := dumpAll(t, pool); !equalDumps(got, want) {
			t.Fatalf("batch size %d: %v\nwant %v", size, got["breakers"], want["breakers"])
		}
	}
}

// TestSinkGapRecorded: a gap moves the checkpoint past it and is a row;
// a gap the checkpoint already covers changes nothing.
func TestSinkGapRecorded(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	if err := RecordGap(ctx, pool, 1, 41, "WAL released"); err != nil {
		t.Fatal(err)
	}
	if err := RecordGap(ctx, pool, 1, 20, "again"); err != nil {
		t.Fatal(err)
	}
	if p := queryInt(t, pool, "SELECT persisted_seq FROM core_checkpoint"); p != 41 {
		t.Fatalf("checkpoint %d", p)
	}
	if rows := dumpTable(t, pool, "sink_gaps", "id"); len(rows) != 1 || !strings.Contains(rows[0], `"to_seq":41`) {
		t.Fatalf("gaps %v", rows)
	}
	if err := RecordGap(ctx, pool, 5, 4, "bad"); err == nil {
		t.Fatal("an inverted gap was accepted")
	}
}
