package persist

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestMigrateIdempotentAndConcurrent(t *testing.T) {
	db := newTestDB(t)
	pool := db.pool(t)
	ctx := context.Background()
	ms, err := Migrations()
	if err != nil || len(ms) == 0 {
		t.Fatalf("migrations: %v %v", ms, err)
	}
	// Four processes starting at once: the advisory lock serializes them.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		p := db.pool(t) // one pool per "process"
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Migrate(ctx, p)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ { // and again, sequentially
		if err := Migrate(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	if n := queryInt(t, pool, "SELECT count(*) FROM schema_migrations"); n != int64(len(ms)) {
		t.Fatalf("%d schema_migrations rows, want %d", n, len(ms))
	}
	if n := queryInt(t, pool, "SELECT max(version) FROM schema_migrations"); n != int64(ms[len(ms)-1].Version) {
		t.Fatalf("latest version %d", n)
	}
	sink := NewSink(pool, Options{})
	if seq, err := sink.PersistedSeq(ctx); err != nil || seq != 0 {
		t.Fatalf("fresh checkpoint %d, %v", seq, err)
	}
	for _, table := range []string{"orders", "trades", "spot_ledger", "wal_events"} {
		if n := queryInt(t, pool, "SELECT count(*) FROM "+table); n != 0 {
			t.Fatalf("%s has %d rows", table, n)
		}
	}
}

// TestReplayAndOverlapDoubleNothing: retried, replayed and overlapping
// batches leave exactly the rows of one clean pass.
func TestReplayAndOverlapDoubleNothing(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	r := crossingScenario(t)
	sink := NewSink(pool, Options{})
	if err := sink.WriteBatch(ctx, r.recs); err != nil {
		t.Fatal(err)
	}
	want := dumpAll(t, pool)
	resetTables(t, pool)

	n := len(r.recs)
	steps := [][2]int{{0, 5}, {0, 5}, {2, 9}, {9, 10}, {0, 10}, {7, n}, {0, n}, {n - 1, n}, {3, 4}}
	for _, s := range steps {
		if err := sink.WriteBatch(ctx, r.recs[s[0]:s[1]]); err != nil {
			t.Fatalf("batch %v: %v", s, err)
		}
	}
	if got := dumpAll(t, pool); !equalDumps(got, want) {
		t.Fatalf("after replays:\n%v\nwant\n%v", got, want)
	}
	checkCrossingTables(t, pool, r)
	st := sink.Stats()
	if st.PersistedSeq != r.lastSeq() || st.Skipped == 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestWriteBatchRefusesGapsAndDisorder(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	r := crossingScenario(t)
	sink := NewSink(pool, Options{})
	if err := sink.WriteBatch(ctx, r.recs[:5]); err != nil {
		t.Fatal(err)
	}
	if err := sink.WriteBatch(ctx, r.recs[6:9]); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("gap: %v", err)
	}
	bad := []Record{r.recs[5], r.recs[7]}
	if err := sink.WriteBatch(ctx, bad); !errors.Is(err, ErrBadBatch) {
		t.Fatalf("disorder: %v", err)
	}
	if seq, _ := sink.PersistedSeq(ctx); seq != 5 {
		t.Fatalf("persisted %d after refused batches", seq)
	}
	if st := sink.Stats(); st.LastError == "" {
		t.Fatalf("last error not recorded: %+v", st)
	}
}

// TestRandomStreamMatchesProcessor writes a few thousand random commands in
// random, sometimes overlapping batches and compares the tables with the
// processor's final state.
func TestRandomStreamMatchesProcessor(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	const users = 12
	r := newRecorder(t)
	r.randomStream(1, 3000, users)
	sink := NewSink(pool, Options{})
	rng := rand.New(rand.NewPCG(7, 7))
	for next := 0; next < len(r.recs); {
		from := next
		if rng.IntN(5) == 0 { // overlap: start up to 20 records back
			from = max(0, next-rng.IntN(20))
		}
		to := min(len(r.recs), next+1+rng.IntN(250))
		if err := sink.WriteBatch(ctx, r.recs[from:to]); err != nil {
			t.Fatal(err)
		}
		next = to
	}
	checkAgainstProcessor(t, pool, r, users)
	st := sink.Stats()
	if st.Records != uint64(len(r.recs)) || st.MissingOrders != 0 || st.PersistedSeq != r.lastSeq() {
		t.Fatalf("stats %+v, want %d records", st, len(r.recs))
	}
	t.Logf("stream: %d commands, %+v", len(r.recs), r.counts())
}

// TestSinkTableIndexes pins the indexes of the sink's tables: each one costs
// Postgres CPU on every row the sink writes (about 7 per order), so adding
// one is a decision to measure (BenchmarkWriteBatchHTTPLike), and the order
// fallback (GET /api/v1/order/{id}) needs the two trades-by-order indexes.
// wal_events_time_brin serves the audit retention job (migration 0020).
func TestSinkTableIndexes(t *testing.T) {
	_, pool := migratedDB(t)
	rows, err := pool.Query(context.Background(), `SELECT tablename || '.' || indexname FROM pg_indexes
		WHERE schemaname = 'public' AND tablename IN ('orders', 'trades', 'spot_ledger', 'wal_events', 'core_checkpoint')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"core_checkpoint.core_checkpoint_pkey", "orders.orders_pkey", "orders.orders_user_idx",
		"trades.trades_maker_order_idx", "trades.trades_maker_user_idx", "trades.trades_pkey",
		"trades.trades_taker_order_idx", "trades.trades_taker_user_idx", "wal_events.wal_events_pkey",
		"wal_events.wal_events_time_brin"}
	if !slices.Equal(got, want) {
		t.Fatalf("indexes of the sink tables:\n got %v\nwant %v", got, want)
	}
	// wal_events' one key finds an order's audit events (spec 004 4.1) and
	// refuses a second copy of an event.
	var def string
	if err := pool.QueryRow(context.Background(), `SELECT indexdef FROM pg_indexes
		WHERE tablename = 'wal_events' AND indexname = 'wal_events_pkey'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(def, "(order_id, seq, idx)") {
		t.Fatalf("wal_events_pkey is %q, want it on (order_id, seq, idx)", def)
	}
}

// Migration 0008 replaces a start-up check (0007) by a guard on future
// moves of the checkpoint, so it must refuse a database already holding
// ledger rows past its checkpoint (the sink would write them again) rather
// than adopt it; once rebuilt, it applies.
func TestMigration0008RefusesLedgerPastCheckpoint(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	// Back to before 0008, with a ledger row past the checkpoint (as 0007
	// allowed to exist, refusing only to write on it).
	if _, err := pool.Exec(ctx, `DROP TRIGGER core_checkpoint_guard ON core_checkpoint;
		DROP TRIGGER core_checkpoint_guard_truncate ON core_checkpoint;
		DROP FUNCTION core_checkpoint_guard();
		CREATE INDEX spot_ledger_seq_brin ON spot_ledger USING brin (seq);
		DELETE FROM schema_migrations WHERE version = 8;
		INSERT INTO spot_ledger (seq, idx, user_id, asset_id, d_available, d_frozen, cause, time)
			VALUES (5, 0, 1, 1, 100, 0, 'ADJUST', now())`); err != nil {
		t.Fatal(err)
	}
	err := Migrate(ctx, pool)
	if err == nil || !strings.Contains(err.Error(), "spot_ledger holds rows past core_checkpoint.persisted_seq") {
		t.Fatalf("migrate over a ledger past the checkpoint: %v", err)
	}
	if n := queryInt(t, pool, "SELECT count(*) FROM schema_migrations WHERE version = 8"); n != 0 {
		t.Fatal("0008 recorded as applied")
	}
	// The rebuild's wipe makes it apply.
	if _, err := pool.Exec(ctx, "TRUNCATE orders, trades, spot_ledger, wal_events"); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE core_checkpoint SET persisted_seq = 0 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
}

// Migration 0009 moves wal_events from two btrees to one key on a table that
// already holds events: the rows stay, an order's events are found through
// the key, and a second copy of an event is still refused.
func TestMigration0009KeepsEventsAndUniqueness(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	// Back to before 0009, with events in the table.
	if _, err := pool.Exec(ctx, `ALTER TABLE wal_events DROP CONSTRAINT wal_events_pkey;
		ALTER TABLE wal_events ADD CONSTRAINT wal_events_pkey PRIMARY KEY (seq, idx);
		CREATE INDEX wal_events_order_idx ON wal_events (order_id);
		DELETE FROM schema_migrations WHERE version = 9;
		INSERT INTO wal_events (seq, idx, event_type, order_id, payload, time) VALUES
			(7, 0, 'ORDER_ACCEPTED', 3, '{"order_id":3}', now()),
			(9, 1, 'ORDER_MATCHED', 3, '{"order_id":3}', now()),
			(9, 2, 'ORDER_MATCHED', 4, '{"order_id":4}', now())`); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, "SELECT count(*) FROM schema_migrations WHERE version = 9"); n != 1 {
		t.Fatal("0009 not recorded as applied")
	}
	if got := queryInt(t, pool, "SELECT count(*) FROM wal_events WHERE order_id = 3"); got != 2 {
		t.Fatalf("order 3 has %d events after the migration, want 2", got)
	}
	if queryInt(t, pool, "SELECT count(*) FROM pg_indexes WHERE indexname = 'wal_events_order_idx'") != 0 {
		t.Fatal("wal_events_order_idx is still there")
	}
	_, err := pool.Exec(ctx, `INSERT INTO wal_events (seq, idx, event_type, order_id, payload, time)
		VALUES (9, 1, 'ORDER_MATCHED', 3, '{"order_id":3}', now())`)
	if err == nil || !strings.Contains(err.Error(), "wal_events_pkey") {
		t.Fatalf("a second copy of an event: %v, want a wal_events_pkey violation", err)
	}
	// The planner reads an order's events through the key (on a table this
	// small only if it may not scan it whole).
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	var plan string
	if err := tx.QueryRow(ctx, "EXPLAIN SELECT seq FROM wal_events WHERE order_id = 3 ORDER BY seq, idx").Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "wal_events_pkey") {
		t.Fatalf("an order's events: plan %q does not use wal_events_pkey", plan)
	}
}
