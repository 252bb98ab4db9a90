package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/logging"
)

// The transfer service (spec 003): configuration, metrics and start-up.
// Behaviour lives in core (p2p*.go) and here (p2p.go, p2p_ticker.go).

// DefaultP2PAsset is the service's default asset, a built-in asset (package instruments).
const DefaultP2PAsset = "USD"

// P2PServiceConfig is the service's configuration (the server's --p2p-* flags).
type P2PServiceConfig struct {
	Asset string        // --p2p-asset: the service's asset symbol; "" = service off
	Hold  time.Duration // --p2p-hold: the cancel window
	Tick  time.Duration // --p2p-tick: how often due transfers are looked for
	// Standby: a replicated standby serves the reads and issues nothing
	// (no ticker, no asset configuration: the primary's log brings them).
	Standby bool
}

// DefaultP2PService is the default configuration.
func DefaultP2PService() P2PServiceConfig {
	return P2PServiceConfig{Asset: DefaultP2PAsset, Hold: 10 * time.Minute, Tick: DefaultP2PTickEvery}
}

// Validate checks f (nothing when the service is off).
func (f *P2PServiceConfig) Validate() error {
	if f.Asset == "" {
		return nil
	}
	if f.Hold < 0 || f.Hold > core.MaxP2PHold || f.Tick <= 0 {
		return fmt.Errorf("--p2p-hold must be in [0, %v], --p2p-tick > 0", time.Duration(core.MaxP2PHold))
	}
	return nil
}

// P2PMetrics are the service's Prometheus metrics (spec 003 §4.3, §8.2).
type P2PMetrics struct {
	transfers *prometheus.CounterVec // status: PENDING (created), COMPLETED, DEBIT_FAILED, CANCELLED
	failures  *prometheus.CounterVec // reason
	users     prometheus.Counter
	ticks     prometheus.Counter
	tickErrs  prometheus.Counter
	perTick   prometheus.Histogram // transfers executed per tick
	tickTime  prometheus.Histogram // seconds, submit to answer

	forgotten    prometheus.Counter // finished transfers the core forgot (KindP2PForget, counted on the view)
	forgetBehind prometheus.Counter // retention rounds put off: the archive had not persisted them
	forgetErrs   prometheus.Counter // retention rounds that failed otherwise (busy or stopped core)

	// byStatus caches transfers' children (WithLabelValues hashes the
	// label on every call: once per transfer event); view goroutine only.
	byStatus [core.P2PCancelled + 1]prometheus.Counter
}

// NewP2PMetrics registers the service's metrics on reg; read runs its
// function on the core's read view (false: no core yet) for the gauges, and
// tickBuckets are the tick duration's buckets in seconds.
func NewP2PMetrics(reg prometheus.Registerer, read func(func(*core.Processor)) bool, tickBuckets []float64) *P2PMetrics {
	f := promauto.With(reg)
	pm := &P2PMetrics{
		transfers: f.NewCounterVec(prometheus.CounterOpts{Name: "ubs_p2p_transfers_total", Help: "User-to-user transfers by the status they entered (PENDING = created)."}, []string{"status"}),
		failures:  f.NewCounterVec(prometheus.CounterOpts{Name: "ubs_p2p_failures_total", Help: "User-to-user transfers that ended DEBIT_FAILED, by reason."}, []string{"reason"}),
		users:     f.NewCounter(prometheus.CounterOpts{Name: "ubs_p2p_users_created_total", Help: "Transfer-service users created."}),
		ticks:     f.NewCounter(prometheus.CounterOpts{Name: "ubs_p2p_ticks_total", Help: "Execution ticks submitted."}),
		tickErrs:  f.NewCounter(prometheus.CounterOpts{Name: "ubs_p2p_tick_errors_total", Help: "Execution ticks that could not be submitted (busy or stopped core)."}),
		perTick:   f.NewHistogram(prometheus.HistogramOpts{Name: "ubs_p2p_tick_executed", Help: "Transfers executed per tick.", Buckets: prometheus.ExponentialBuckets(1, 4, 9)}),
		tickTime:  f.NewHistogram(prometheus.HistogramOpts{Name: "ubs_p2p_tick_duration_seconds", Help: "Tick duration, sequenced to answered.", Buckets: tickBuckets}),
		forgotten: f.NewCounter(prometheus.CounterOpts{Name: "ubs_p2p_forgotten_total",
			Help: "Finished user-to-user transfers the core forgot past --p2p-retention (history serves them from p2p_transfers)."}),
		forgetBehind: f.NewCounter(prometheus.CounterOpts{Name: "ubs_p2p_forget_deferred_total",
			Help: "Retention rounds that forgot nothing because the archive (p2p_transfers) had not persisted the transfers yet (alert when it keeps growing: the core keeps every finished transfer)."}),
		forgetErrs: f.NewCounter(prometheus.CounterOpts{Name: "ubs_p2p_forget_errors_total", Help: "Retention rounds whose forget could not be submitted or was refused."}),
	}
	stats := func(get func(core.P2PStats) float64) func() float64 {
		return func() float64 {
			var v float64
			read(func(pr *core.Processor) { v = get(pr.P2PStats()) })
			return v
		}
	}
	gaugeFunc := func(name, help string, fn func() float64) {
		f.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
	}
	gaugeFunc("ubs_p2p_pending", "User-to-user transfers PENDING now.", stats(func(s core.P2PStats) float64 { return float64(s.Pending) }))
	gaugeFunc("ubs_p2p_retained", "User-to-user transfers the core holds now (PENDING and finished ones not yet forgotten).",
		stats(func(s core.P2PStats) float64 { return float64(s.Transfers) }))
	gaugeFunc("ubs_p2p_retained_finished", "Finished user-to-user transfers the core holds now (what the retention may forget).",
		stats(func(s core.P2PStats) float64 { return float64(s.Finished) }))
	gaugeFunc("ubs_p2p_oldest_pending_age_seconds", "Age of the PENDING transfer due first (0 = none).", stats(func(s core.P2PStats) float64 {
		if s.Pending == 0 {
			return 0
		}
		return time.Since(time.Unix(0, s.OldestMade)).Seconds()
	}))
	gaugeFunc("ubs_p2p_overdue_seconds", "How far past its executeAt the first due transfer is (0 = none due; alert when it grows: ticks are not executing).",
		stats(func(s core.P2PStats) float64 {
			if s.Pending == 0 {
				return 0
			}
			return max(0, time.Since(time.Unix(0, s.OldestDue)).Seconds())
		}))
	return pm
}

// transferCounter is transfers' child for st (view goroutine only).
func (pm *P2PMetrics) transferCounter(st core.P2PStatus) prometheus.Counter {
	if int(st) >= len(pm.byStatus) {
		return pm.transfers.WithLabelValues(st.String())
	}
	if pm.byStatus[st] == nil {
		pm.byStatus[st] = pm.transfers.WithLabelValues(st.String())
	}
	return pm.byStatus[st]
}

// OnView counts the service's events and logs its outcomes (spec 003 §4.3:
// INFO for completions and cancels, WARN for failures), on the view goroutine.
func (pm *P2PMetrics) OnView(log *slog.Logger, scale uint8) func(c *core.Command, evs []core.Event) {
	return func(c *core.Command, evs []core.Event) {
		if c.Kind == core.KindP2PForget && len(evs) > 0 {
			if r := &evs[len(evs)-1]; r.Kind == core.EvResult && r.Code == core.OK {
				pm.forgotten.Add(float64(r.Qty))
			}
			return
		}
		for i := range evs {
			e := &evs[i]
			switch e.Kind {
			case core.EvP2PUser:
				pm.users.Inc()
			case core.EvP2PTransfer:
				if e.Flags != 0 {
					continue // a repeated requestId
				}
				st := core.P2PStatus(e.Detail)
				pm.transferCounter(st).Inc()
				amt := FormatUnits(int64(e.Amount), scale)
				switch st {
				case core.P2PCompleted:
					logging.Attrs(log, slog.LevelInfo, "Transfer completed", slog.Uint64("transferId", uint64(e.OrderID)),
						slog.Uint64("fromUser", uint64(e.User)), slog.Uint64("toUser", uint64(e.OtherUser)), slog.String("amount", amt))
				case core.P2PCancelled:
					logging.Attrs(log, slog.LevelInfo, "Transfer cancelled", slog.Uint64("transferId", uint64(e.OrderID)),
						slog.Uint64("fromUser", uint64(e.User)), slog.String("amount", amt))
				case core.P2PDebitFailed:
					pm.failures.WithLabelValues(e.Code.String()).Inc()
					log.Warn("Transfer failed", "transferId", uint64(e.OrderID), "fromUser", uint64(e.User), "toUser", uint64(e.OtherUser),
						"amount", amt, "reason", e.Code.String())
				}
			}
		}
	}
}

// ErrP2PAsset: the configured asset of the service is not an instrument.
var ErrP2PAsset = errors.New("not a configured asset")

// StartP2P makes sure the service's asset is configured in the core and
// starts the execution timer. It returns the gateway's config and a stop
// function (nil, nil when the service is off).
func StartP2P(f P2PServiceConfig, b Backend, reg *Registry, pm *P2PMetrics, log *slog.Logger) (*P2PConfig, func(), error) {
	if f.Asset == "" {
		return nil, func() {}, nil
	}
	a, ok := reg.Asset(f.Asset)
	if !ok && f.Asset == DefaultP2PAsset {
		// A --config without USD: the service is off unless asked for by name.
		log.Info("p2p: transfer service off: the config has no asset " + DefaultP2PAsset + " (set --p2p-asset)")
		return nil, func() {}, nil
	}
	if !ok {
		return nil, nil, fmt.Errorf("--p2p-asset %q is %w", f.Asset, ErrP2PAsset)
	}
	if f.Standby {
		log.Info("p2p: transfer service reads only (standby)", "asset", a.Symbol)
		return &P2PConfig{Asset: a.ID, Scale: a.Scale, Hold: f.Hold}, func() {}, nil
	}
	configured := false
	if err := b.Read(func(p *core.Processor, _ *History) error { _, configured = p.AssetScale(a.ID); return nil }); err != nil {
		return nil, nil, err
	}
	if !configured { // a data dir from before the asset existed
		evs, err := b.Submit(&core.Command{Kind: core.KindConfigAsset, Asset: a.ID, BaseScale: a.Scale}, nil)
		if err != nil {
			return nil, nil, err
		}
		if c := evs[len(evs)-1].Code; c != core.OK {
			return nil, nil, fmt.Errorf("p2p: configure asset %s: %v", a.Symbol, c)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		RunP2PTicker(ctx, b, f.Tick, func(n int, d time.Duration, err error) {
			pm.ticks.Inc()
			if err != nil {
				pm.tickErrs.Inc()
				log.Warn("p2p: tick not submitted", "err", err)
				return
			}
			pm.perTick.Observe(float64(n))
			pm.tickTime.Observe(d.Seconds())
		})
	})
	log.Info("p2p: transfer service on", "asset", a.Symbol, "hold", f.Hold, "tick", f.Tick)
	return &P2PConfig{Asset: a.ID, Scale: a.Scale, Hold: f.Hold}, func() { cancel(); wg.Wait() }, nil
}

// Scale is the scale of the service's asset among assets (for log lines; 0 when off).
func (f *P2PServiceConfig) Scale(assets []Asset) uint8 {
	for _, a := range assets {
		if a.Symbol == f.Asset {
			return a.Scale
		}
	}
	return 0
}
