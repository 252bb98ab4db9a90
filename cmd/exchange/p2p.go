package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/logging"
)

// The transfer service (spec 003): flags, metrics and wiring. Behaviour
// lives in core (p2p*.go) and gateway (p2p.go, p2p_ticker.go).

// defaultP2PAsset is --p2p-asset's default, a built-in asset (instruments.go).
const defaultP2PAsset = "USD"

// p2pFlags are the --p2p-* flags.
type p2pFlags struct {
	Asset string        // --p2p-asset: the service's asset symbol; "" = service off
	Hold  time.Duration // --p2p-hold: the cancel window
	Tick  time.Duration // --p2p-tick: how often due transfers are looked for
}

func (f *p2pFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.Asset, "p2p-asset", defaultP2PAsset, "the asset of the user-to-user transfer service (spec 003: /balance-service, /transfers); empty = service off")
	fs.DurationVar(&f.Hold, "p2p-hold", 10*time.Minute, "how long a user-to-user transfer stays PENDING (cancellable) before it executes")
	fs.DurationVar(&f.Tick, "p2p-tick", gateway.DefaultP2PTickEvery, "how often the timer executes the due user-to-user transfers")
}

func (f *p2pFlags) validate() error {
	if f.Asset == "" {
		return nil
	}
	if f.Hold < 0 || f.Hold > core.MaxP2PHold || f.Tick <= 0 {
		return fmt.Errorf("--p2p-hold must be in [0, %v], --p2p-tick > 0", time.Duration(core.MaxP2PHold))
	}
	return nil
}

// p2pMetrics are the service's Prometheus metrics (spec 003 §4.3, §8.2).
type p2pMetrics struct {
	transfers *prometheus.CounterVec // status: PENDING (created), COMPLETED, DEBIT_FAILED, CANCELLED
	failures  *prometheus.CounterVec // reason
	users     prometheus.Counter
	ticks     prometheus.Counter
	tickErrs  prometheus.Counter
	perTick   prometheus.Histogram // transfers executed per tick
	tickTime  prometheus.Histogram // seconds, submit to answer

	// byStatus caches transfers' children (WithLabelValues hashes the
	// label on every call: once per transfer event); view goroutine only.
	byStatus [core.P2PCancelled + 1]prometheus.Counter
}

func newP2PMetrics(m *metrics, pl func() *journal.Pipeline) *p2pMetrics {
	f := promFactory{m.reg}
	pm := &p2pMetrics{
		transfers: f.counterVec("ubs_p2p_transfers_total", "User-to-user transfers by the status they entered (PENDING = created).", "status"),
		failures:  f.counterVec("ubs_p2p_failures_total", "User-to-user transfers that ended DEBIT_FAILED, by reason.", "reason"),
		users:     f.counter("ubs_p2p_users_created_total", "Transfer-service users created."),
		ticks:     f.counter("ubs_p2p_ticks_total", "Execution ticks submitted."),
		tickErrs:  f.counter("ubs_p2p_tick_errors_total", "Execution ticks that could not be submitted (busy or stopped core)."),
		perTick:   f.histogram("ubs_p2p_tick_executed", "Transfers executed per tick.", prometheus.ExponentialBuckets(1, 4, 9)),
		tickTime:  f.histogram("ubs_p2p_tick_duration_seconds", "Tick duration, sequenced to answered.", latencyBuckets),
	}
	stats := func(get func(core.P2PStats) float64) func() float64 {
		return func() float64 {
			p := pl()
			if p == nil {
				return 0
			}
			var v float64
			_ = p.Read(func(pr *core.Processor) error { v = get(pr.P2PStats()); return nil })
			return v
		}
	}
	f.gaugeFunc("ubs_p2p_pending", "User-to-user transfers PENDING now.", stats(func(s core.P2PStats) float64 { return float64(s.Pending) }))
	f.gaugeFunc("ubs_p2p_oldest_pending_age_seconds", "Age of the PENDING transfer due first (0 = none).", stats(func(s core.P2PStats) float64 {
		if s.Pending == 0 {
			return 0
		}
		return time.Since(time.Unix(0, s.OldestMade)).Seconds()
	}))
	f.gaugeFunc("ubs_p2p_overdue_seconds", "How far past its executeAt the first due transfer is (0 = none due; alert when it grows: ticks are not executing).",
		stats(func(s core.P2PStats) float64 {
			if s.Pending == 0 {
				return 0
			}
			return max(0, time.Since(time.Unix(0, s.OldestDue)).Seconds())
		}))
	return pm
}

// transferCounter is transfers' child for st (view goroutine only).
func (pm *p2pMetrics) transferCounter(st core.P2PStatus) prometheus.Counter {
	if int(st) >= len(pm.byStatus) {
		return pm.transfers.WithLabelValues(st.String())
	}
	if pm.byStatus[st] == nil {
		pm.byStatus[st] = pm.transfers.WithLabelValues(st.String())
	}
	return pm.byStatus[st]
}

// onView counts the service's events and logs its outcomes (spec 003 §4.3:
// INFO for completions and cancels, WARN for failures), on the view goroutine.
func (pm *p2pMetrics) onView(log *slog.Logger, scale uint8) func(c *core.Command, evs []core.Event) {
	return func(c *core.Command, evs []core.Event) {
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
				amt := gateway.FormatUnits(int64(e.Amount), scale)
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

// startP2P makes sure the service's asset is configured in the core and
// starts the execution timer. It returns the gateway's config and a stop
// function (nil, nil when the service is off).
func startP2P(f p2pFlags, pl *journal.Pipeline, b gateway.Backend, reg *gateway.Registry, pm *p2pMetrics, log *slog.Logger) (*gateway.P2PConfig, func(), error) {
	if f.Asset == "" {
		return nil, func() {}, nil
	}
	a, ok := reg.Asset(f.Asset)
	if !ok && f.Asset == defaultP2PAsset {
		// A --config without USD: the service is off unless asked for by name.
		log.Info("p2p: transfer service off: the config has no asset " + defaultP2PAsset + " (set --p2p-asset)")
		return nil, func() {}, nil
	}
	if !ok {
		return nil, nil, usageError{fmt.Errorf("--p2p-asset %q is not a configured asset", f.Asset)}
	}
	configured := false
	if err := pl.Read(func(p *core.Processor) error { _, configured = p.AssetScale(a.ID); return nil }); err != nil {
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
		gateway.RunP2PTicker(ctx, b, f.Tick, func(n int, d time.Duration, err error) {
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
	return &gateway.P2PConfig{Asset: a.ID, Scale: a.Scale, Hold: f.Hold}, func() { cancel(); wg.Wait() }, nil
}

// p2pScale is the scale of the service's asset (for log lines; 0 when off).
func p2pScale(cfg Config) uint8 {
	for _, a := range cfg.Instruments.Assets {
		if a.Symbol == cfg.P2P.Asset {
			return a.Scale
		}
	}
	return 0
}
