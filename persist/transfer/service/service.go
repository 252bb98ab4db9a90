// Package service is the internal-transfer service a server runs
// (gateway.TransferService): the transfer.Coordinator on its one path (a
// transfer.Batcher whose transactions run every Postgres step, each FUNDING
// operation fused with the transitions around it) over the FUNDING ledger
// and the SPOT adapter (SpotAdapter, the sequenced core), the recovery
// worker, the conservation monitor (MON-003), the per-user rate limits,
// fault injection for the spec 000 tests, and their metrics. A server
// passes a Config, calls New, Start, and Close at the end.
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/logging"
	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/invariant"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/ratelimit"
	"github.com/ubscore/ubscore/persist/transfer/transferfault"
)

// SpotCallTimeout is how long the SPOT adapter waits for the core's
// durable answer before reporting TIMEOUT (the FSM then retries by req_id).
const SpotCallTimeout = 5 * time.Second

// Config is what the service needs from the server; the comments give the
// meaning of the server's flags.
type Config struct {
	Pool     *pgxpool.Pool
	Pipeline *journal.Pipeline
	// Migrated is set once the migrations ran: until then every request
	// answers SERVICE_UNAVAILABLE and nothing runs in the background.
	Migrated *atomic.Bool
	Assets   []model.AssetConfig // the transferable assets (--config)
	// PerSecond and PerDay are the per-user limits of spec 1.5.6
	// (--transfer-rate-per-second, --transfer-per-day); 0 disables one.
	PerSecond, PerDay int
	// StaleAfter is the recovery worker's threshold: non-terminal transfers
	// not updated for this long are resumed (--transfer-stale-after).
	StaleAfter time.Duration
	// InvariantInterval runs the conservation check every interval; 0: only
	// on request (--invariant-interval).
	InvariantInterval time.Duration
	// FaultInjection lets /admin/v1/faults make the adapters fail or kill
	// the process (--enable-fault-injection; spec 000's tests): FUNDING
	// faults inside the batch transactions, SPOT faults around the adapter.
	FaultInjection bool
	// Jobs run beside the worker once the tables exist, until Close.
	Jobs []func(ctx context.Context)
	// OnCommit, if set, sees every committed state change (transfer.Config.OnCommit:
	// the WebSocket fan-out's funding channel).
	OnCommit func(transfer.Transfer)
	Logger   *slog.Logger
}

// Service is the internal-transfer service. It exists only with Postgres.
type Service struct {
	log      *slog.Logger
	store    *transfer.Store
	funding  *transfer.Funding
	coord    *transfer.Coordinator
	worker   *transfer.Worker
	monitor  *invariant.InvariantMonitor
	assets   map[string]model.AssetConfig
	migrated *atomic.Bool
	faults   *faultSet // nil without fault injection
	periodic bool      // the monitor runs on its own
	batcher  *transfer.Batcher
	jobs     []func(ctx context.Context)

	wg   sync.WaitGroup
	stop context.CancelFunc
}

var _ gateway.TransferService = (*Service)(nil)

// New wires the service; Start runs its background jobs.
func New(cfg Config) (*Service, error) {
	log, pl, pool := cfg.Logger, cfg.Pipeline, cfg.Pool
	if log == nil {
		log = slog.Default()
	}
	t := &Service{log: log, assets: map[string]model.AssetConfig{}, migrated: cfg.Migrated, jobs: cfg.Jobs}
	// Steps of concurrent transfers share transactions (one writer: with
	// more, racing drivers' batches can deadlock and rerun).
	t.batcher = transfer.NewBatcher(pool, transfer.BatchOptions{Writers: 1})
	t.store, t.funding = transfer.NewStore(t.batcher), transfer.NewFunding(t.batcher)
	var assetIDs []core.AssetID
	for _, a := range cfg.Assets {
		t.assets[a.Symbol] = a
		assetIDs = append(assetIDs, a.ID)
	}
	var spotSide model.Side = NewSpotAdapter(pl, SpotCallTimeout)
	if cfg.FaultInjection {
		crash := func() {
			logging.Critical(context.Background(), log, "fault injection: killing the process (crash test)")
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL is not deliverable late; never return into the step
		}
		// FUNDING faults are injected below the one path, inside the batch
		// transactions (fused steps included); the SPOT side is wrapped.
		f, s := transferfault.New(nil), transferfault.New(spotSide)
		f.Crash, s.Crash = crash, crash
		t.batcher.SetFaults(f)
		// What a previous process performed must never be refused by an
		// injected explicit failure after a restart.
		s.Performed = func(_ context.Context, op model.Op, reqID string) (bool, error) {
			kind := map[model.Op]core.Kind{model.OpWithdraw: core.KindSpotWithdraw,
				model.OpDeposit: core.KindSpotDeposit, model.OpRefund: core.KindSpotRefund}[op]
			key, ok := core.KeyFrom(reqID)
			if !ok {
				return false, nil
			}
			var done bool
			err := pl.Read(func(p *core.Processor) error {
				_, done = p.SpotOp(kind, key)
				return nil
			})
			return done, err
		}
		t.faults = &faultSet{funding: f, spot: s}
		spotSide = s
		log.Warn("fault injection enabled: /admin/v1/faults can make adapters fail or kill the process")
	}
	limits := model.RateLimits{PerSecond: cfg.PerSecond, PerDay: cfg.PerDay}
	amountLimited := map[core.AssetID]bool{}
	for _, a := range t.assets {
		if a.DailyAmountLimit > 0 {
			amountLimited[a.ID] = true
		}
	}
	var rate func(context.Context, core.UserID, core.AssetID) model.RateState
	if limits.PerSecond > 0 || limits.PerDay > 0 || len(amountLimited) > 0 {
		rl, err := ratelimit.New(ratelimit.Config{Limits: limits, Usage: t.store, Logger: log,
			AmountLimited: amountLimited})
		if err != nil {
			return nil, err
		}
		rate = rl.Rate
	}
	coord, err := transfer.NewCoordinator(transfer.Config{Store: t.store, Spot: spotSide,
		Assets: func(sym string) (model.AssetConfig, bool) { a, ok := t.assets[sym]; return a, ok },
		Rate:   rate, Limits: limits, Logger: log, OnCommit: cfg.OnCommit})
	if err != nil {
		return nil, err
	}
	t.coord = coord
	log.Info("internal transfers", "fault_injection", cfg.FaultInjection,
		"stale_after", cfg.StaleAfter.String())
	t.worker = transfer.NewWorker(coord, transfer.WorkerConfig{StaleAfter: cfg.StaleAfter})
	t.periodic = cfg.InvariantInterval > 0
	if t.monitor, err = invariant.NewInvariantMonitor(invariant.MonitorConfig{Pool: pool,
		Spot: &spotReader{pl: pl, assets: assetIDs}, Assets: assetIDs, Interval: cfg.InvariantInterval, Logger: log}); err != nil {
		return nil, err
	}
	return t, nil
}

// Faults is the fault injector of /admin/v1/faults; nil without
// Config.FaultInjection.
func (t *Service) Faults() gateway.FaultInjector {
	if t.faults == nil {
		return nil
	}
	return t.faults
}

// Start runs the batcher, and the recovery worker, the conservation
// monitor and Config.Jobs once the tables exist, until Close.
func (t *Service) Start() {
	t.batcher.Start()
	ctx, cancel := context.WithCancel(context.Background())
	t.stop = cancel
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		if !persist.WaitMigrated(ctx, t.migrated, 50*time.Millisecond) {
			return
		}
		var jobs sync.WaitGroup
		jobs.Go(func() { _ = t.worker.Run(ctx) })
		for _, j := range t.jobs {
			jobs.Go(func() { j(ctx) })
		}
		if t.periodic {
			jobs.Go(func() { _ = t.monitor.Run(ctx) })
		}
		jobs.Wait()
	}()
}

// Close stops the background jobs (a step in progress finishes first).
func (t *Service) Close() {
	if t.stop != nil {
		t.stop()
	}
	t.wg.Wait()
	t.batcher.Close() // after the worker: it answers what is queued
}

// errNotReady answers transfer requests before the migrations ran (the
// server is ready for trading before Postgres is: it may be down).
var errNotReady = &model.Error{Code: gateway.CodeServiceUnavailable, Message: "the transfer service is not ready (Postgres not reached yet); retry"}

func (t *Service) AssetConfig(symbol string) (model.AssetConfig, bool) {
	a, ok := t.assets[symbol]
	return a, ok
}

func (t *Service) Create(ctx context.Context, caller model.Caller, req model.Request) (transfer.Result, error) {
	if !t.migrated.Load() {
		return transfer.Result{}, errNotReady
	}
	if t.monitor.Halted() {
		return transfer.Result{}, &model.Error{Code: gateway.CodeTransfersHalted,
			Message: "internal transfers are halted after a conservation check failure; an operator must resume them"}
	}
	return t.coord.Create(ctx, caller, req)
}

func (t *Service) Get(ctx context.Context, reqID string) (transfer.Transfer, error) {
	if !t.migrated.Load() {
		return transfer.Transfer{}, errNotReady
	}
	return t.store.Get(ctx, reqID)
}

func (t *Service) List(ctx context.Context, user core.UserID, page, size int) ([]transfer.Transfer, int64, error) {
	if !t.migrated.Load() {
		return nil, 0, errNotReady
	}
	return t.store.List(ctx, user, page, size)
}

func (t *Service) FundingBalances(ctx context.Context, user core.UserID) (map[core.AssetID]model.AccountState, error) {
	if !t.migrated.Load() {
		return nil, errNotReady
	}
	return t.funding.Balances(ctx, user)
}

func (t *Service) Deposit(ctx context.Context, txRef string, user core.UserID, asset core.AssetID, amount core.Units) (bool, error) {
	if !t.migrated.Load() {
		return false, errNotReady
	}
	return t.funding.ExternalDeposit(ctx, txRef, user, asset, amount)
}

func (t *Service) SetFundingStatus(ctx context.Context, user core.UserID, asset core.AssetID, st model.AccountStatus) error {
	if !t.migrated.Load() {
		return errNotReady
	}
	var err error
	if asset == 0 {
		err = t.funding.SetStatusAll(ctx, user, st)
	} else {
		err = t.funding.SetStatus(ctx, user, asset, st)
	}
	if errors.Is(err, transfer.ErrNotFound) {
		return &model.Error{Code: model.CodeSourceAccountNotFound, Message: "no such FUNDING account"}
	}
	return err
}

// invariantJSON is the answer of GET /admin/v1/invariants.
type invariantJSON struct {
	OK        bool                 `json:"ok"`
	Halted    bool                 `json:"transfers_halted"`
	Assets    []assetInvariantJSON `json:"assets"`
	Anomalies []invariant.Anomaly  `json:"anomalies"`
	Moving    int                  `json:"moving_transfers"`
	Checked   time.Time            `json:"checked_at"`
	Failures  int64                `json:"violations_total"`
}

// assetInvariantJSON is one asset's equation, amounts in asset units:
// funding + spot + in_flight == deposits + adjustments (diff = lhs - rhs).
type assetInvariantJSON struct {
	Asset       string   `json:"asset"`
	Funding     *big.Int `json:"funding"`
	Spot        *big.Int `json:"spot"`
	InFlight    *big.Int `json:"in_flight"`
	InFlightFSM *big.Int `json:"in_flight_by_state"`
	Deposits    *big.Int `json:"deposits"`
	Adjustments *big.Int `json:"adjustments"`
	Withdrawn   *big.Int `json:"withdrawn"` // on-chain withdrawals PENDING or COMPLETED
	Diff        *big.Int `json:"diff"`
	OK          bool     `json:"ok"`
}

func (t *Service) Invariants(ctx context.Context) ([]byte, error) {
	if !t.migrated.Load() {
		return nil, errNotReady
	}
	rep, err := t.monitor.CheckNow(ctx)
	if err != nil {
		return nil, err
	}
	out := invariantJSON{OK: rep.OK, Halted: t.monitor.Halted(), Anomalies: append([]invariant.Anomaly{}, rep.Anomalies...), Moving: rep.Moving,
		Checked: rep.At.UTC(), Failures: t.monitor.Violations(), Assets: []assetInvariantJSON{}}
	for _, a := range rep.Assets {
		name := fmt.Sprintf("#%d", a.Asset)
		for sym, c := range t.assets {
			if c.ID == a.Asset {
				name = sym
			}
		}
		out.Assets = append(out.Assets, assetInvariantJSON{Asset: name, Funding: a.Funding, Spot: a.Spot,
			InFlight: a.InFlight, InFlightFSM: a.InFlightFSM, Deposits: a.Deposits, Adjustments: a.Adjustments,
			Withdrawn: a.Withdrawn, Diff: a.Diff, OK: a.OK})
	}
	return json.Marshal(out)
}

func (t *Service) ResumeTransfers(context.Context) ([]byte, error) {
	t.monitor.Resume()
	return json.Marshal(map[string]bool{"transfers_halted": t.monitor.Halted()})
}

// Register exports the coordinator's and the monitor's counters.
func (t *Service) Register(reg prometheus.Registerer) {
	st := t.coord.Stats()
	counter := func(name, help string, v *atomic.Int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v.Load()) }))
	}
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	counter("ubs_transfers_committed_total", "Internal transfers committed.", &st.Committed)
	counter("ubs_transfers_failed_total", "Internal transfers failed at the source (nothing moved).", &st.Failed)
	counter("ubs_transfers_rolled_back_total", "Internal transfers compensated (refunded to the source).", &st.RolledBack)
	counter("ubs_transfers_unknown_outcomes_total", "Adapter answers that were not SUCCESS or EXPLICIT_FAIL (each a CRITICAL log; retried forever).", &st.Unknown)
	counter("ubs_transfers_cas_lost_total", "Transfer state changes refused because another driver moved first.", &st.CASLost)
	counter("ubs_transfers_stuck_total", "Stale transfers found in TARGET_PENDING or COMPENSATING by the recovery worker (MON-001).", &st.Stuck)
	counter("ubs_transfers_refund_failures_total", "Refund attempts that did not succeed.", &st.RefundFailures)
	counter("ubs_transfers_mon002_alerts_total", "MON-002: CRITICAL alerts of a transfer whose refund failed 3 times or more.", &st.MON002)
	gauge("ubs_transfers_halted", "1 while new internal transfers are halted by a conservation violation (MON-003).", func() float64 {
		if t.monitor.Halted() {
			return 1
		}
		return 0
	})
	gauge("ubs_conservation_violations_total", "FUNDING+SPOT conservation check failures (MON-003).", func() float64 {
		return float64(t.monitor.Violations())
	})
}

// spotReader is the core side of the conservation check: totals and the
// spot operations of the transfers asked, in one read of the view.
type spotReader struct {
	pl     *journal.Pipeline
	assets []core.AssetID
}

func (r *spotReader) SpotSnapshot(_ context.Context, reqIDs []string) (invariant.SpotSnapshot, error) {
	snap := invariant.SpotSnapshot{Total: map[core.AssetID]core.Units{}, Adjustments: map[core.AssetID]core.Units{},
		Ops: make(map[string]invariant.SpotOps, len(reqIDs))}
	keys := make([]core.Key, len(reqIDs))
	for i, id := range reqIDs {
		k, ok := core.KeyFrom(id)
		if !ok {
			return snap, fmt.Errorf("spot snapshot: req_id %q is not a core key", id)
		}
		keys[i] = k
	}
	err := r.pl.Read(func(p *core.Processor) error {
		for _, a := range r.assets {
			snap.Total[a], snap.Adjustments[a] = p.AssetTotal(a), p.AdjustedTotal(a)
		}
		applied := func(kind core.Kind, k core.Key) bool {
			code, ok := p.SpotOp(kind, k)
			return ok && code == core.OK
		}
		for i, k := range keys {
			snap.Ops[reqIDs[i]] = invariant.SpotOps{Withdrawn: applied(core.KindSpotWithdraw, k),
				Deposited: applied(core.KindSpotDeposit, k), Refunded: applied(core.KindSpotRefund, k)}
		}
		return nil
	})
	return snap, err
}

// faultSet is gateway.FaultInjector over the two adapters' Faulty wrappers.
type faultSet struct{ funding, spot *transferfault.Faulty }

var faultModes = map[string]model.Fault{
	"explicit_fail":         model.FaultExplicitFail,
	"timeout_after_effect":  model.FaultTimeoutAfterEffect,
	"timeout_before_effect": model.FaultTimeoutBeforeEffect,
	"network_error":         model.FaultNetworkError,
	"pending":               model.FaultPending,
	"unknown":               model.FaultUnknown,
	"crash_before":          model.FaultCrashBefore,
	"crash_after":           model.FaultCrashAfter,
}

func (f *faultSet) Inject(adapter, op, mode string, count int) error {
	var a *transferfault.Faulty
	switch adapter {
	case "funding":
		a = f.funding
	case "spot":
		a = f.spot
	default:
		return fmt.Errorf("adapter must be funding or spot")
	}
	o := model.Op(op)
	if o != model.OpWithdraw && o != model.OpDeposit && o != model.OpRefund {
		return fmt.Errorf("op must be withdraw, deposit or refund")
	}
	m, ok := faultModes[mode]
	if !ok {
		return fmt.Errorf("mode must be explicit_fail, timeout_after_effect, timeout_before_effect, network_error, pending, unknown, crash_before or crash_after")
	}
	a.Inject(o, m, count)
	return nil
}

func (f *faultSet) Clear() {
	f.funding.Clear()
	f.spot.Clear()
}
