package persist

import (
	"context"
	"testing"
	"time"
)

// BenchmarkWriteBatch writes a 20k-command random stream in batches of
// DefaultMaxBatch records and reports records and rows per second.
func BenchmarkWriteBatch(b *testing.B) {
	_, pool := migratedDB(b)
	ctx := context.Background()
	r := newRecorder(b)
	r.randomStream(3, 20_000, 200)
	sink := NewSink(pool, Options{})
	var busy time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := pool.Exec(ctx, `TRUNCATE orders, trades, spot_ledger, wal_events;
			UPDATE core_checkpoint SET persisted_seq = 0`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		for j := 0; j < len(r.recs); j += DefaultMaxBatch {
			if err := sink.WriteBatch(ctx, r.recs[j:min(j+DefaultMaxBatch, len(r.recs))]); err != nil {
				b.Fatal(err)
			}
		}
		busy += time.Since(start)
	}
	st := sink.Stats()
	b.ReportMetric(float64(st.Records)/busy.Seconds(), "records/s")
	b.ReportMetric(float64(st.Rows)/busy.Seconds(), "rows/s")
}
