// Package metrics is the exchange's Prometheus registry and the metrics of
// its pipeline: HTTP requests (the gateway's observer), WAL group commits,
// what the core did (from the read view), the sequence numbers and the
// sink's lag. Features register their own metrics on Reg.
package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// Metrics is the server's Prometheus registry. Labels are bounded sets
// (routes, HTTP statuses, core codes): never user ids.
type Metrics struct {
	Reg *prometheus.Registry

	requests   *prometheus.CounterVec   // route, status
	byRoute    sync.Map                 // routeStatus -> routeObservers
	latency    *prometheus.HistogramVec // route; seconds, µs-resolution buckets
	batchSize  prometheus.Histogram     // commands per group commit
	appendTime prometheus.Histogram     // write + fsync per group commit, seconds
	orders     prometheus.Counter       // orders accepted by the core
	trades     prometheus.Counter
	rejections *prometheus.CounterVec // code
	// Violations counts invariant violations: per-command (the view) and
	// those the periodic check finds (package protection adds them).
	Violations prometheus.Counter

	pl        atomic.Pointer[journal.Pipeline] // set once the core is up
	persisted atomic.Pointer[func() core.Seq]  // the sink's persisted seq (unset: no sink)
}

// LatencyBuckets are latency buckets in seconds, from 25 µs to 1 s.
var LatencyBuckets = []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1}

// New returns the registry with the pipeline's metrics (and the Go and
// process collectors) registered.
func New() *Metrics {
	m := &Metrics{Reg: prometheus.NewRegistry()}
	f := promFactory{m.Reg}
	m.requests = f.counterVec("ubs_http_requests_total", "HTTP requests by route and status.", "route", "status")
	m.latency = f.histogramVec("ubs_http_request_duration_seconds", "HTTP request latency by route.", LatencyBuckets, "route")
	m.batchSize = f.histogram("ubs_journal_batch_commands", "Commands per WAL group commit.",
		prometheus.ExponentialBuckets(1, 4, 8))
	m.appendTime = f.histogram("ubs_journal_append_seconds", "WAL write + fsync time per group commit.", LatencyBuckets)
	m.orders = f.counter("ubs_orders_accepted_total", "Orders accepted by the core.")
	m.trades = f.counter("ubs_trades_total", "Trades executed.")
	m.rejections = f.counterVec("ubs_rejections_total", "Commands rejected by the core, by reason code.", "code")
	m.Violations = f.counter("ubs_invariant_violations_total", "Invariant violations detected by a per-command check or the periodic full check (each halts a market or the core).")
	f.gaugeFunc("ubs_durable_seq", "Highest seq fsynced in the WAL.", m.seqOf((*journal.Pipeline).DurableSeq))
	f.gaugeFunc("ubs_applied_seq", "Highest seq applied by the processor.", m.seqOf((*journal.Pipeline).AppliedSeq))
	f.gaugeFunc("ubs_acked_seq", "Highest seq answered.", m.seqOf((*journal.Pipeline).AckedSeq))
	f.gaugeFunc("ubs_ring_depth", "Commands sequenced but not yet answered.", func() float64 {
		if pl := m.pl.Load(); pl != nil {
			return float64(pl.InFlight())
		}
		return 0
	})
	f.gaugeFunc("ubs_persisted_seq", "Highest seq written to Postgres by the sink.", func() float64 {
		if p := m.persisted.Load(); p != nil {
			return float64((*p)())
		}
		return 0
	})
	f.gaugeFunc("ubs_sink_lag_commands", "Durable commands not yet in Postgres (durable_seq - persisted_seq).", func() float64 {
		pl, p := m.pl.Load(), m.persisted.Load()
		if pl == nil || p == nil {
			return 0
		}
		d := pl.DurableSeq()
		return float64(d - min((*p)(), d))
	})
	m.Reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetPipeline gives the metrics the recovered core.
func (m *Metrics) SetPipeline(pl *journal.Pipeline) { m.pl.Store(pl) }

// SetPersisted gives the metrics the sink's persisted seq.
func (m *Metrics) SetPersisted(persisted func() core.Seq) { m.persisted.Store(&persisted) }

// DurableSeq is the WAL's durable seq (0 before the core is up).
func (m *Metrics) DurableSeq() core.Seq {
	if pl := m.pl.Load(); pl != nil {
		return pl.DurableSeq()
	}
	return 0
}

// Read runs fn on the core's read view (false: no core yet, or stopped).
func (m *Metrics) Read(fn func(*core.Processor)) bool {
	pl := m.pl.Load()
	return pl != nil && pl.Read(func(p *core.Processor) error { fn(p); return nil }) == nil
}

func (m *Metrics) seqOf(get func(*journal.Pipeline) core.Seq) func() float64 {
	return func() float64 {
		if pl := m.pl.Load(); pl != nil {
			return float64(get(pl))
		}
		return 0
	}
}

// Observe records one HTTP request (the gateway's metrics hook).
func (m *Metrics) Observe(route string, status int, d time.Duration) {
	k := routeStatus{route, status}
	o, ok := m.byRoute.Load(k)
	if !ok { // first request of this route and status: resolve the label values once
		o, _ = m.byRoute.LoadOrStore(k, routeObservers{m.requests.WithLabelValues(route, strconv.Itoa(status)),
			m.latency.WithLabelValues(route)})
	}
	ro := o.(routeObservers)
	ro.requests.Inc()
	ro.latency.Observe(d.Seconds())
}

// routeStatus keys metrics.byRoute.
type routeStatus struct {
	route  string
	status int
}

// routeObservers are the children of requests and latency for one route and
// status (WithLabelValues hashes the labels and formats the status on every
// call; the routes and statuses are few).
type routeObservers struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// JournalBatch is journal.Config.OnJournalBatch.
func (m *Metrics) JournalBatch(n int, d time.Duration) {
	m.batchSize.Observe(float64(n))
	m.appendTime.Observe(d.Seconds())
}

// OnView counts what the core did; called on the view goroutine for every
// command, in seq order.
func (m *Metrics) OnView(_ *core.Command, evs []core.Event) {
	for i := range evs {
		e := &evs[i]
		switch e.Kind {
		case core.EvOrderAccepted:
			m.orders.Inc()
		case core.EvTrade:
			m.trades.Inc()
		case core.EvInvariantViolation:
			m.Violations.Inc()
		case core.EvResult:
			if e.Code != core.OK {
				m.rejections.WithLabelValues(e.Code.String()).Inc()
			}
		}
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(m.Reg, promhttp.HandlerOpts{}))
}

// promFactory registers collectors on one registry.
type promFactory struct{ reg *prometheus.Registry }

func (f promFactory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f promFactory) gaugeFunc(name, help string, fn func() float64) {
	f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

func (f promFactory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f promFactory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f promFactory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}
