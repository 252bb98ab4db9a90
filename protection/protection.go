// Package protection wires spec 004's runtime protection into the server:
// breaker alerts and metrics, the breaker log, the periodic full check of
// the core on the read replica, the audit retention job, and the metrics
// read from the recovered state (so they are right after a restart).
// Behaviour lives in core (breakers, invariants), journal (RunChecker,
// Retention), gateway (BreakerLog) and persist (RunAuditRetention).
package protection

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/logging"
	"github.com/ubscore/ubscore/persist"
)

// Config is the runtime protection's configuration (the server's flags).
type Config struct {
	// CoreCheckInterval is the period of the core's full invariant check on
	// the read replica (--core-check-interval; 0 = off).
	CoreCheckInterval time.Duration
	// AuditRetention is how long wal_events rows are kept (--audit-retention;
	// 0 = forever).
	AuditRetention time.Duration
}

// Default is the default configuration.
func Default() Config {
	return Config{CoreCheckInterval: 10 * time.Second, AuditRetention: persist.DefaultAuditRetention}
}

// Protection is the server's runtime protection.
type Protection struct {
	log *slog.Logger
	reg *gateway.Registry
	// Breakers is the breaker log: fed by the read view (Apply) and the
	// history warm-up (Replay), read by the gateway.
	Breakers *gateway.BreakerLog
	ret      *journal.Retention

	trips      *prometheus.CounterVec // reason
	checkTime  prometheus.Histogram
	violations prometheus.Counter // metrics.violations: also what the periodic check finds
	pl         atomic.Pointer[journal.Pipeline]
}

// checkBuckets are the full check's duration buckets in seconds (spec 004
// §7.1 alerts at p99 > 100 ms).
var checkBuckets = []float64{1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5}

// New registers the protection's metrics on reg (violations: the server's
// invariant violation counter, which the periodic check adds to); markets
// names the markets in alerts and metrics, ret is the WAL retention whose
// released followers are exported.
func New(reg prometheus.Registerer, violations prometheus.Counter, markets *gateway.Registry, ret *journal.Retention, log *slog.Logger) *Protection {
	p := &Protection{log: log, reg: markets, Breakers: &gateway.BreakerLog{}, ret: ret, violations: violations}
	f := promauto.With(reg)
	p.trips = f.NewCounterVec(prometheus.CounterOpts{Name: "ubs_circuit_breaker_triggered_total",
		Help: "Circuit breaker trips (a market or the core halted), by reason."}, []string{"reason"})
	for _, r := range core.BreakerReasons() {
		p.trips.WithLabelValues(r.String()) // every reason exported from the start, at 0
	}
	p.checkTime = f.NewHistogram(prometheus.HistogramOpts{Name: "ubs_invariant_check_seconds",
		Help: "Duration of the periodic full invariant check on the read replica.", Buckets: checkBuckets})
	p.Breakers.OnChange = p.onBreaker
	reg.MustRegister(&stateCollector{p: p})
	return p
}

// SetPipeline gives the state metrics the recovered core (before it, they
// export the followers only).
func (p *Protection) SetPipeline(pl *journal.Pipeline) { p.pl.Store(pl) }

// onBreaker alerts and counts each live trip and resolution (view goroutine).
func (p *Protection) onBreaker(b core.BreakerChange) {
	name := "*"
	if b.Market != 0 {
		name = p.marketName(b.Market)
	}
	if b.Resolve {
		p.log.Warn("circuit breaker resolved", "market", name, "status", b.Status.String(), "seq", b.Seq,
			"by_user", uint64(b.User), "note", b.Text)
		return
	}
	p.trips.WithLabelValues(b.Reason.String()).Inc()
	logging.Critical(context.Background(), p.log, "circuit breaker tripped: market halted", "market", name, "reason", b.Reason.String(),
		"seq", b.Seq, "details", string(b.ContextJSON()))
}

func (p *Protection) marketName(id core.MarketID) string {
	if m, ok := p.reg.MarketByID(id); ok {
		return m.Symbol
	}
	return "#" + strconv.FormatUint(uint64(id), 10)
}

// runChecker runs the periodic full check until ctx ends; it stops the
// server only if the pipeline does.
func (p *Protection) runChecker(ctx context.Context, pl *journal.Pipeline, interval time.Duration) {
	err := pl.RunChecker(ctx, journal.CheckerConfig{Interval: interval, Replica: journal.CheckOnState,
		OnCheck: func(d time.Duration, _ core.Seq, open []core.Violation) {
			p.checkTime.Observe(d.Seconds())
			p.violations.Add(float64(len(open)))
		}})
	if err != nil && ctx.Err() == nil {
		p.log.Error("core check: stopped", "err", err)
	}
}

// runAuditRetention prunes old wal_events once the tables exist.
func runAuditRetention(ctx context.Context, pool *pgxpool.Pool, migrated *atomic.Bool, retention time.Duration, log *slog.Logger) {
	if !persist.WaitMigrated(ctx, migrated, time.Second) {
		return
	}
	persist.RunAuditRetention(ctx, pool, retention, time.Hour, log)
}

// stateCollector exports what is read from the core's state at scrape time
// (right after a restart, since it is the recovered state itself), and the
// recovery and eviction counts.
type stateCollector struct{ p *Protection }

var (
	descBookOrders  = prometheus.NewDesc("ubs_book_orders", "Resting orders per market.", []string{"market"}, nil)
	descMarkets     = prometheus.NewDesc("ubs_markets", "Markets per status (CORE_HALTED: 1 while the core is halted).", []string{"status"}, nil)
	descHalted      = prometheus.NewDesc("ubs_markets_halted", "Markets currently halted.", nil, nil)
	descRecoveries  = prometheus.NewDesc("ubs_recoveries_total", "Core state rebuilds since start: the start-up recovery, then one per eviction.", nil, nil)
	descEvictions   = prometheus.NewDesc("ubs_evictions_total", "Commands discarded since start (poison, or a failed per-command check), each rebuilding the state.", nil, nil)
	descRecovery    = prometheus.NewDesc("ubs_recovery_seconds", "Duration of the start-up recovery (market=all) and of each market's verification in it.", []string{"market"}, nil)
	descFollowerRel = prometheus.NewDesc("ubs_follower_released_total", "Times the WAL a follower still needed was released (--follower-max-retained).", []string{"follower"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBookOrders, descMarkets, descHalted, descRecoveries, descEvictions,
		descRecovery, descFollowerRel} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range c.p.ret.Followers() {
		ch <- prometheus.MustNewConstMetric(descFollowerRel, prometheus.CounterValue, float64(f.Released), f.Name)
	}
	pl := c.p.pl.Load()
	if pl == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descRecoveries, prometheus.CounterValue, float64(pl.Recoveries()))
	ch <- prometheus.MustNewConstMetric(descEvictions, prometheus.CounterValue, float64(pl.Evictions()))
	rec := pl.Recovery()
	ch <- prometheus.MustNewConstMetric(descRecovery, prometheus.GaugeValue, rec.Duration.Seconds(), "all")
	for id, d := range rec.MarketCheck {
		ch <- prometheus.MustNewConstMetric(descRecovery, prometheus.GaugeValue, d.Seconds(), c.p.marketName(id))
	}
	var markets []core.MarketView
	var coreHalted bool
	if err := pl.Read(func(p *core.Processor) error { markets, coreHalted = p.Markets(), p.Halted(); return nil }); err != nil {
		return
	}
	count := map[core.MarketStatus]int{core.MarketActive: 0, core.MarketHalted: 0, core.MarketSuspended: 0}
	for _, m := range markets {
		count[m.Status]++
		ch <- prometheus.MustNewConstMetric(descBookOrders, prometheus.GaugeValue, float64(m.Orders), c.p.marketName(m.ID))
	}
	for _, s := range []core.MarketStatus{core.MarketActive, core.MarketSuspended, core.MarketHalted} {
		ch <- prometheus.MustNewConstMetric(descMarkets, prometheus.GaugeValue, float64(count[s]), s.String())
	}
	ch <- prometheus.MustNewConstMetric(descMarkets, prometheus.GaugeValue, b2f(coreHalted), "CORE_HALTED")
	ch <- prometheus.MustNewConstMetric(descHalted, prometheus.GaugeValue, float64(count[core.MarketHalted]))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Start runs the periodic core check (CoreCheckInterval) and, with
// Postgres (pool not nil), the audit retention job (AuditRetention) once
// migrated is set; the returned function stops them and waits.
func (p *Protection) Start(pl *journal.Pipeline, pool *pgxpool.Pool, migrated *atomic.Bool, cfg Config) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if cfg.CoreCheckInterval > 0 {
		wg.Go(func() { p.runChecker(ctx, pl, cfg.CoreCheckInterval) })
	}
	if pool != nil && cfg.AuditRetention > 0 {
		wg.Go(func() { runAuditRetention(ctx, pool, migrated, cfg.AuditRetention, p.log) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}
