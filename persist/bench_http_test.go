package persist

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
)

// httpLikeStream appends n limit orders shaped like cmd/bench's http load
// (crossing GTC orders of 0.001 BTC around 50,000 by 64 users: almost every
// order fills at once or is filled by the next one).
func (r *recorder) httpLikeStream(n, users int) {
	for u := 1; u <= users; u++ {
		r.ok(core.Command{Kind: core.KindAdjust, User: core.UserID(u), Asset: usdt, Amount: 1_000_000_000 * oneUSDT,
			Key: key(fmt.Sprintf("fund-usdt-%d", u))})
		r.ok(core.Command{Kind: core.KindAdjust, User: core.UserID(u), Asset: btc, Amount: 100_000 * oneBTC,
			Key: key(fmt.Sprintf("fund-btc-%d", u))})
	}
	for k := 0; k < n; k++ {
		c, i := k%256, k/256 // request i of connection c
		side, price := core.Buy, 50_000+i%5
		if (c+i)%2 == 0 {
			side, price = core.Sell, 49_998+i%5
		}
		r.apply(limit(core.UserID(1+(c*7+i)%users), side, core.GTC, core.Price(price)*oneUSDT, oneBTC/1000, ""))
	}
}

// backendCPU is the CPU time (user+system) of every backend connected to
// the pool's database, read from /proc (Postgres on this host).
func backendCPU(tb testing.TB, pool *pgxpool.Pool) time.Duration {
	rows, err := pool.Query(context.Background(),
		"SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
	if err != nil {
		tb.Fatal(err)
	}
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			tb.Fatal(err)
		}
		pids = append(pids, pid)
	}
	rows.Close()
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue // not local, or gone
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ = 100
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWriteBatchHTTPLike writes 100k http-like orders in batches of
// 1024 records and reports Postgres backend CPU and this process's CPU per
// record (the sink's costs at the http benchmark's mix). For experiments:
// UBS_BENCH_BATCH sets the batch size,
// UBS_BENCH_SQL runs after the migrations (e.g. a DROP INDEX), and
// UBS_BENCH_PIDFILE receives the backend pids after the first batch (for
// perf record -p).
func BenchmarkWriteBatchHTTPLike(b *testing.B) {
	db, _ := migratedDB(b)
	cfg := db.poolConfig()
	ConfigurePool(cfg) // as the exchange's pool
	pool := openPool(b, cfg)
	ctx := context.Background()
	r := newRecorder(b)
	r.httpLikeStream(100_000, 64)
	if q := os.Getenv("UBS_BENCH_SQL"); q != "" { // experiments
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	batch := 1024
	if v, err := strconv.Atoi(os.Getenv("UBS_BENCH_BATCH")); err == nil && v > 0 {
		batch = v
	}
	var busy, pgCPU, cpu time.Duration
	var recs uint64
	for i := 0; i < b.N; i++ {
		if _, err := pool.Exec(ctx, `TRUNCATE orders, trades, spot_ledger, wal_events;
			UPDATE core_checkpoint SET persisted_seq = 0`); err != nil {
			b.Fatal(err)
		}
		sink := NewSink(pool, Options{})
		pg0, c0, start := backendCPU(b, pool), selfCPU(), time.Now()
		for j := 0; j < len(r.recs); j += batch {
			if err := sink.WriteBatch(ctx, r.recs[j:min(j+batch, len(r.recs))]); err != nil {
				b.Fatal(err)
			}
			if f := os.Getenv("UBS_BENCH_PIDFILE"); f != "" && j == 0 { // for perf -p
				var pids string
				_ = pool.QueryRow(ctx, "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE datname = current_database()").Scan(&pids)
				_ = os.WriteFile(f, []byte(pids), 0o644)
			}
		}
		busy += time.Since(start)
		cpu += selfCPU() - c0
		pgCPU += backendCPU(b, pool) - pg0
		recs += sink.Stats().Records
	}
	b.ReportMetric(float64(recs)/busy.Seconds(), "records/s")
	b.ReportMetric(float64(pgCPU.Microseconds())/float64(recs), "pg-us/record")
	b.ReportMetric(float64(cpu.Microseconds())/float64(recs), "client-us/record")
}

// TestHTTPLikeStreamShape keeps BenchmarkWriteBatchHTTPLike's workload
// shaped like the http benchmark's (as measured on its database: per order
// 1 orders row, 0.5 trades, ~4.1 ledger rows, 1.5 audit events).
func TestHTTPLikeStreamShape(t *testing.T) {
	r := newRecorder(t)
	r.httpLikeStream(1000, 64)
	var b batchRows
	b.derive(r.recs[len(r.recs)-1000:])
	if len(b.orders) != 1000 || len(b.trades) != 500 || len(b.events) != 1500 || len(b.ledger) < 4000 || len(b.ledger) > 4200 {
		t.Fatalf("1000 orders: %d orders rows, %d trades, %d ledger rows, %d events", len(b.orders), len(b.trades),
			len(b.ledger), len(b.events))
	}
}
