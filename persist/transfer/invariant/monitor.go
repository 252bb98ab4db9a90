package invariant

import (
	"context"
	"errors"
	"github.com/ubscore/ubscore/persist/transfer"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultInvariantInterval is the time between two conservation checks.
const DefaultInvariantInterval = 10 * time.Second

// MonitorConfig wires an InvariantMonitor.
type MonitorConfig struct {
	Pool     *pgxpool.Pool
	Spot     SpotReader
	Assets   []transfer.AssetID // assets checked; nil = every asset seen
	Interval time.Duration      // default DefaultInvariantInterval
	Logger   *slog.Logger
}

// InvariantMonitor runs CheckInvariant periodically (MON-003). A violation
// is logged at LevelCritical, counted, and halts: Halted() stays true until
// an operator calls Resume, whatever later checks find (a broken invariant
// is investigated, never repaired by waiting). While Halted() the server
// refuses new transfers. A check that ends in an error proves nothing
// either way: it is logged at Error and counted, and does not halt.
type InvariantMonitor struct {
	cfg        MonitorConfig
	log        *slog.Logger
	halted     atomic.Bool
	violations atomic.Int64 // checks that found a violation
	errors     atomic.Int64 // checks that could not conclude

	checking sync.Mutex // one check at a time (each takes the transfers_tb lock)

	mu     sync.Mutex // guards the last report
	last   InvariantReport
	lastAt time.Time
	have   bool
}

// NewInvariantMonitor checks cfg and fills its defaults.
func NewInvariantMonitor(cfg MonitorConfig) (*InvariantMonitor, error) {
	if cfg.Pool == nil || cfg.Spot == nil {
		return nil, errors.New("transfer: invariant monitor needs Pool and Spot")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInvariantInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &InvariantMonitor{cfg: cfg, log: cfg.Logger}, nil
}

// Run checks at once and then every Interval until ctx is done.
func (m *InvariantMonitor) Run(ctx context.Context) error {
	tick := time.NewTicker(m.cfg.Interval)
	defer tick.Stop()
	for {
		_, _ = m.CheckNow(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// CheckNow runs one check now (waiting for a running one to end first),
// records it and halts on a violation.
func (m *InvariantMonitor) CheckNow(ctx context.Context) (InvariantReport, error) {
	m.checking.Lock()
	defer m.checking.Unlock()
	rep, err := CheckInvariant(ctx, m.cfg.Pool, m.cfg.Spot, m.cfg.Assets)
	if err != nil {
		if ctx.Err() == nil {
			m.errors.Add(1)
			m.log.Error("transfer invariant check failed to run", "err", err)
		}
		return rep, err
	}
	m.mu.Lock()
	m.last, m.lastAt, m.have = rep, time.Now(), true
	m.mu.Unlock()
	if !rep.OK {
		m.violations.Add(1)
		m.halted.Store(true)
		m.logViolation(ctx, rep)
	}
	return rep, nil
}

func (m *InvariantMonitor) logViolation(ctx context.Context, rep InvariantReport) {
	attrs := []any{slog.Time("at", rep.At), slog.Int("moving", rep.Moving)}
	for _, a := range rep.Assets {
		if !a.OK {
			attrs = append(attrs, slog.Group("asset", "id", a.Asset, "diff", a.Diff.String(),
				"funding", a.Funding.String(), "spot", a.Spot.String(), "in_flight", a.InFlight.String(),
				"deposits", a.Deposits.String(), "adjustments", a.Adjustments.String()))
		}
	}
	for _, x := range rep.Anomalies {
		attrs = append(attrs, slog.Group("anomaly", "req_id", x.ReqID, "asset", x.Asset,
			"state", x.State.String(), "reason", x.Reason))
	}
	m.log.Log(ctx, transfer.LevelCritical, "fund conservation violated: transfers halted until an operator resumes", attrs...)
}

// Halted reports whether a violation was found since the last Resume.
func (m *InvariantMonitor) Halted() bool { return m.halted.Load() }

// Resume clears the halt (an operator's decision after investigating). The
// next check halts again if the violation is still there.
func (m *InvariantMonitor) Resume() {
	if m.halted.Swap(false) {
		m.log.Warn("transfer invariant halt cleared by an operator")
	}
}

// Last returns the last completed report, when it completed, and whether
// there is one.
func (m *InvariantMonitor) Last() (InvariantReport, time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last, m.lastAt, m.have
}

// Violations returns how many checks found a violation.
func (m *InvariantMonitor) Violations() int64 { return m.violations.Load() }

// Errors returns how many checks could not conclude.
func (m *InvariantMonitor) Errors() int64 { return m.errors.Load() }
