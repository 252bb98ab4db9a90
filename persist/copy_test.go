package persist

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The hand-built binary COPY (copyBuf) must write exactly what pgx's generic
// CopyFrom writes for the same rows. refWriteRows is that generic path (the
// sink's writer before copyBuf), kept as the reference.

func refCopy(ctx context.Context, tx pgx.Tx, table string, cols []string, n int, fill func(i int, vals []any)) error {
	if n == 0 {
		return nil
	}
	vals := make([]any, len(cols))
	got, err := tx.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromSlice(n, func(i int) ([]any, error) {
		fill(i, vals)
		return vals, nil
	}))
	if err == nil && got != int64(n) {
		err = fmt.Errorf("%d of %d rows", got, n)
	}
	return err
}

func refTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

func refWriteRows(ctx context.Context, tx pgx.Tx, b *batchRows) error {
	if err := refCopy(ctx, tx, "trades", tradeColumns, len(b.trades), func(i int, v []any) {
		r := &b.trades[i]
		v[0], v[1], v[2], v[3], v[4], v[5] = r.tradeID, r.seq, r.market, r.price, r.qty, r.quote
		v[6], v[7], v[8], v[9] = r.makerOrder, r.takerOrder, r.makerUser, r.takerUser
		v[10], v[11], v[12], v[13] = r.makerFee, r.takerFee, r.takerSide, refTime(r.at)
		for j := 14; j < 20; j++ {
			v[j] = nil
		}
		if r.fillKind != "" {
			v[14], v[15], v[16], v[17] = r.fillKind, r.takerOutcome, r.makerOutcome, r.makerSide
			v[18], v[19] = r.makerPrice, r.takerPrice
		}
	}); err != nil {
		return err
	}
	if err := refCopy(ctx, tx, "spot_ledger", ledgerColumns, len(b.ledger), func(i int, v []any) {
		r := &b.ledger[i]
		v[0], v[1], v[2], v[3], v[4], v[5], v[6] = r.seq, r.idx, r.user, r.asset, r.dAvail, r.dFrozen, r.cause
		v[7], v[8], v[9] = nil, nil, refTime(r.at)
		if r.hasRef {
			v[7] = r.ref
		}
		if r.hasTrade {
			v[8] = r.tradeID
		}
	}); err != nil {
		return err
	}
	if err := refCopy(ctx, tx, "wal_events", walEventColumns, len(b.events), func(i int, v []any) {
		r := &b.events[i]
		v[0], v[1], v[2], v[3], v[4], v[5] = r.seq, r.idx, r.typ, r.order, b.payloads[r.start:r.end], refTime(r.at)
	}); err != nil {
		return err
	}
	var fresh []*orderRow
	for i := range b.orders {
		if b.orders[i].isNew {
			fresh = append(fresh, &b.orders[i])
		}
	}
	if err := refCopy(ctx, tx, "orders", orderColumns, len(fresh), func(i int, v []any) {
		o := fresh[i]
		v[0], v[1], v[2] = int64(o.id), int64(o.user), int32(o.market)
		v[3], v[4], v[5] = o.side.String(), o.typ.String(), o.tif.String()
		v[6], v[7], v[8], v[9] = int64(o.price), int64(o.qty), int64(o.quoteQty), int64(o.filled)
		v[10], v[11] = o.status.String(), nil
		if !o.clientID.IsZero() {
			v[11] = keyText(o.clientID)
		}
		v[12], v[13] = int64(o.createdSeq), int64(o.updatedSeq)
		v[14], v[15] = refTime(o.createdAt), refTime(o.updatedAt)
		for j := 16; j < 22; j++ {
			v[j] = nil
		}
		if o.outcome != 0 {
			v[16], v[17], v[18] = o.outcome.String(), bookType(o.outcome, o.bookSide), o.bookSide.String()
			v[19], v[20], v[21] = int64(o.bookPrice), frozenAssetType(o.side), int64(o.hold)
		}
	}); err != nil {
		return err
	}
	if err := writeBinary(ctx, tx, &b.binaryRows); err != nil { // not a COPY: the same statements on both sides
		return err
	}
	return writeBreakers(ctx, tx, b.breakerRows)
}

// TestBinaryCopyMatchesPgxCopy writes a random stream (every command kind,
// NULL and non-NULL refs, trade ids and client ids) in one batch through
// both writers and requires identical tables, and row values at the edges of
// their types to round-trip.
func TestBinaryCopyMatchesPgxCopy(t *testing.T) {
	_, pool := migratedDB(t)
	ctx := context.Background()
	r := newRecorder(t)
	r.randomStream(5, 2000, 10)
	var b batchRows
	b.derive(r.recs)
	// Values at the edges: extreme ints, times before 2000 and before 1970
	// with sub-microsecond parts, a key with non-ASCII text.
	b.trades = append(b.trades, tradeRow{tradeID: math.MaxInt64, seq: math.MinInt64, market: math.MinInt32,
		price: -1, qty: 1 << 40, takerSide: "SELL", at: -1_234_567_891})
	b.trades = append(b.trades, tradeRow{tradeID: math.MaxInt64 - 1, takerSide: "BUY", fillKind: "MINT", takerOutcome: "NO",
		makerOutcome: "YES", makerSide: "BUY", makerPrice: math.MaxInt64, takerPrice: math.MinInt64})
	b.ledger = append(b.ledger, ledgerRow{seq: math.MaxInt64, idx: math.MaxInt32, user: -5, asset: -1, dAvail: math.MinInt64,
		cause: "ADJUST", ref: "réf €", hasRef: true, at: 946_684_799_999_999_999})
	write := func(ref bool) map[string][]string {
		resetTables(t, pool)
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if ref {
			err = refWriteRows(ctx, tx, &b)
		} else {
			var cb copyBuf
			_, err = writeRows(ctx, tx, &b, &cb)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return dumpAll(t, pool)
	}
	want, got := write(true), write(false)
	for k := range want {
		if len(want[k]) == 0 && k != "binary" && k != "positions" { // no binary markets in this stream
			t.Fatalf("reference wrote no %s rows", k)
		}
	}
	if !equalDumps(got, want) {
		for k := range want {
			for i := range want[k] {
				if i >= len(got[k]) || got[k][i] != want[k][i] {
					t.Errorf("%s row %d:\n got %v\nwant %s", k, i, got[k][i:min(i+1, len(got[k]))], want[k][i])
					break
				}
			}
		}
		t.FailNow()
	}
	// wal_events.payload is json: kept byte for byte as derived.
	rows, err := pool.Query(ctx, "SELECT seq, idx, payload::text, pg_typeof(payload)::text FROM wal_events ORDER BY seq, idx")
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for ; rows.Next(); i++ {
		var seq int64
		var idx int32
		var payload, typ string
		if err := rows.Scan(&seq, &idx, &payload, &typ); err != nil {
			t.Fatal(err)
		}
		e := b.events[i]
		if seq != e.seq || idx != e.idx || payload != string(b.payloads[e.start:e.end]) || typ != "json" {
			t.Fatalf("wal_events row %d: %d/%d %s %s; want %d/%d %s json", i, seq, idx, typ, payload, e.seq, e.idx,
				b.payloads[e.start:e.end])
		}
	}
	if rows.Err() != nil || i != len(b.events) {
		t.Fatalf("%d wal_events rows, want %d (%v)", i, len(b.events), rows.Err())
	}
}
