package main

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
	"github.com/ubscore/ubscore/persist/transfer"
)

// spotCallTimeout is how long the SPOT adapter waits for the core's durable
// answer before reporting TIMEOUT (the FSM then retries by req_id).
const spotCallTimeout = 5 * time.Second

// transfers is the internal-transfer service (gateway.TransferService):
// the coordinator over the FUNDING ledger (Postgres) and the SPOT adapter
// (the core), the recovery worker, the conservation monitor (MON-003) and
// the per-user rate limits. It exists only with Postgres.
type transfers struct {
	log      *slog.Logger
	store    *transfer.Store
	funding  *transfer.Funding
	coord    *transfer.Coordinator
	worker   *transfer.Worker
	monitor  *transfer.InvariantMonitor
	assets   map[string]transfer.AssetConfig
	assetIDs []core.AssetID
	migrated *atomic.Bool      // persist.Migrate has run: the tables exist
	faults   *faultSet         // nil without --enable-fault-injection
	periodic bool              // the monitor runs on its own (--invariant-interval > 0)
	batcher  *transfer.Batcher // nil without --transfer-batching
	forget   *opsForgetter     // makes the core forget terminal transfers' req_ids

	wg   sync.WaitGroup
	stop context.CancelFunc
}

var _ gateway.TransferService = (*transfers)(nil)

// newTransfers wires the service; start runs its background jobs.
func newTransfers(cfg Config, pl *journal.Pipeline, pool *pgxpool.Pool, migrated *atomic.Bool, log *slog.Logger, onCommit func(transfer.Transfer)) (*transfers, error) {
	t := &transfers{log: log, assets: map[string]transfer.AssetConfig{}, migrated: migrated,
		forget: newOpsForgetter(pool, pl, log)}
	if cfg.TransferBatching {
		// Steps of concurrent transfers share transactions (one writer:
		// with more, racing drivers' batches can deadlock and rerun).
		t.batcher = transfer.NewBatcher(pool, transfer.BatchOptions{Writers: 1})
		t.store, t.funding = transfer.NewStoreBatched(pool, t.batcher), transfer.NewFundingBatched(pool, t.batcher)
	} else {
		t.store, t.funding = transfer.NewStore(pool), transfer.NewFunding(pool)
	}
	for _, a := range cfg.transferAssets() {
		t.assets[a.Symbol] = a
		t.assetIDs = append(t.assetIDs, a.ID)
	}
	var fundingSide, spotSide transfer.Side = t.funding, &spotAdapter{pl: pl, timeout: spotCallTimeout}
	if cfg.FaultInjection {
		crash := func() {
			logging.Critical(context.Background(), log, "fault injection: killing the process (crash test)")
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL is not deliverable late; never return into the step
		}
		// FUNDING faults are injected below the one path, inside the
		// batch transactions (fused steps included): the coordinator keeps
		// the *Funding production runs. The SPOT side is wrapped.
		f, s := transfer.NewFaulty(nil), transfer.NewFaulty(spotSide)
		f.Crash, s.Crash = crash, crash
		if t.batcher != nil {
			t.batcher.SetFaults(f)
		} else {
			f = transfer.NewFaulty(fundingSide)
			f.Crash = crash
			// What a previous process performed must never be refused by an
			// injected explicit failure after a restart (a crash test would
			// then compensate an effect that happened).
			f.Performed = func(ctx context.Context, op transfer.Op, reqID string) (bool, error) {
				var done bool
				err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM transfer_operations
					WHERE req_id = $1 AND adapter = 'funding' AND op = $2)`, reqID, string(op)).Scan(&done)
				return done, err
			}
			fundingSide = f
		}
		// What a previous process performed must never be refused by an
		// injected explicit failure after a restart.
		s.Performed = func(_ context.Context, op transfer.Op, reqID string) (bool, error) {
			kind := map[transfer.Op]core.Kind{transfer.OpWithdraw: core.KindSpotWithdraw,
				transfer.OpDeposit: core.KindSpotDeposit, transfer.OpRefund: core.KindSpotRefund}[op]
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
	limits := transfer.RateLimits{PerSecond: cfg.TransferPerSecond, PerDay: cfg.TransferPerDay}
	amountLimited := map[core.AssetID]bool{}
	for _, a := range t.assets {
		if a.DailyAmountLimit > 0 {
			amountLimited[a.ID] = true
		}
	}
	var rate func(context.Context, core.UserID, core.AssetID) transfer.RateState
	if limits.PerSecond > 0 || limits.PerDay > 0 || len(amountLimited) > 0 {
		rl, err := transfer.NewRateLimiter(transfer.RateLimiterConfig{Limits: limits, Usage: t.store, Logger: log,
			AmountLimited: amountLimited})
		if err != nil {
			return nil, err
		}
		rate = rl.Rate
	}
	coord, err := transfer.NewCoordinator(transfer.Config{Store: t.store, Funding: fundingSide, Spot: spotSide,
		Assets: func(sym string) (transfer.AssetConfig, bool) { a, ok := t.assets[sym]; return a, ok },
		Rate:   rate, Limits: limits, Logger: log, Fuse: cfg.TransferBatching, OnCommit: onCommit})
	if err != nil {
		return nil, err
	}
	t.coord = coord
	// Fused: a FUNDING operation and the CAS transitions around it commit in
	// one transaction (needs the batcher; fault injection runs it too).
	log.Info("internal transfers", "batching", cfg.TransferBatching, "fused", coord.Fused(),
		"fault_injection", cfg.FaultInjection, "stale_after", cfg.TransferStaleAfter.String())
	t.worker = transfer.NewWorker(coord, transfer.WorkerConfig{StaleAfter: cfg.TransferStaleAfter})
	t.periodic = cfg.InvariantInterval > 0
	if t.monitor, err = transfer.NewInvariantMonitor(transfer.MonitorConfig{Pool: pool,
		Spot: &spotReader{pl: pl, assets: t.assetIDs}, Assets: t.assetIDs, Interval: cfg.InvariantInterval, Logger: log}); err != nil {
		return nil, err
	}
	return t, nil
}

// start runs the recovery worker and the conservation monitor once the
// tables exist, until close.
func (t *transfers) start() {
	if t.batcher != nil {
		t.batcher.Start()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.stop = cancel
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for !t.migrated.Load() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		var jobs sync.WaitGroup
		jobs.Go(func() { _ = t.worker.Run(ctx) })
		jobs.Go(func() { t.forget.run(ctx, spotOpsForgetEvery) })
		if t.periodic {
			jobs.Go(func() { _ = t.monitor.Run(ctx) })
		}
		jobs.Wait()
	}()
}

// close stops the background jobs (a step in progress finishes first).
func (t *transfers) close() {
	if t.stop != nil {
		t.stop()
	}
	t.wg.Wait()
	if t.batcher != nil {
		t.batcher.Close() // after the worker: it answers what is queued
	}
}

// errNotReady answers transfer requests before the migrations ran (the
// server is ready for trading before Postgres is: it may be down).
var errNotReady = &transfer.Error{Code: gateway.CodeServiceUnavailable, Message: "the transfer service is not ready (Postgres not reached yet); retry"}

func (t *transfers) AssetConfig(symbol string) (transfer.AssetConfig, bool) {
	a, ok := t.assets[symbol]
	return a, ok
}

func (t *transfers) Create(ctx context.Context, caller transfer.Caller, req transfer.Request) (transfer.Result, error) {
	if !t.migrated.Load() {
		return transfer.Result{}, errNotReady
	}
	if t.monitor.Halted() {
		return transfer.Result{}, &transfer.Error{Code: gateway.CodeTransfersHalted,
			Message: "internal transfers are halted after a conservation check failure; an operator must resume them"}
	}
	return t.coord.Create(ctx, caller, req)
}

func (t *transfers) Get(ctx context.Context, reqID string) (transfer.Transfer, error) {
	if !t.migrated.Load() {
		return transfer.Transfer{}, errNotReady
	}
	return t.store.Get(ctx, reqID)
}

func (t *transfers) List(ctx context.Context, user core.UserID, page, size int) ([]transfer.Transfer, int64, error) {
	if !t.migrated.Load() {
		return nil, 0, errNotReady
	}
	return t.store.List(ctx, user, page, size)
}

func (t *transfers) FundingBalances(ctx context.Context, user core.UserID) (map[core.AssetID]transfer.AccountState, error) {
	if !t.migrated.Load() {
		return nil, errNotReady
	}
	return t.funding.Balances(ctx, user)
}

func (t *transfers) Deposit(ctx context.Context, txRef string, user core.UserID, asset core.AssetID, amount core.Units) (bool, error) {
	if !t.migrated.Load() {
		return false, errNotReady
	}
	return t.funding.ExternalDeposit(ctx, txRef, user, asset, amount)
}

func (t *transfers) SetFundingStatus(ctx context.Context, user core.UserID, asset core.AssetID, st transfer.AccountStatus) error {
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
		return &transfer.Error{Code: transfer.CodeSourceAccountNotFound, Message: "no such FUNDING account"}
	}
	return err
}

// invariantJSON is the answer of GET /admin/v1/invariants.
type invariantJSON struct {
	OK        bool                 `json:"ok"`
	Halted    bool                 `json:"transfers_halted"`
	Assets    []assetInvariantJSON `json:"assets"`
	Anomalies []transfer.Anomaly   `json:"anomalies"`
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

func (t *transfers) Invariants(ctx context.Context) ([]byte, error) {
	if !t.migrated.Load() {
		return nil, errNotReady
	}
	rep, err := t.monitor.CheckNow(ctx)
	if err != nil {
		return nil, err
	}
	out := invariantJSON{OK: rep.OK, Halted: t.monitor.Halted(), Anomalies: append([]transfer.Anomaly{}, rep.Anomalies...), Moving: rep.Moving,
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

func (t *transfers) ResumeTransfers(context.Context) ([]byte, error) {
	t.monitor.Resume()
	return json.Marshal(map[string]bool{"transfers_halted": t.monitor.Halted()})
}

// register exports the coordinator's and the monitor's counters.
func (t *transfers) register(m *metrics) {
	f := promFactory{m.reg}
	st := t.coord.Stats()
	counter := func(name, help string, v *atomic.Int64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v.Load()) }))
	}
	counter("ubs_transfers_committed_total", "Internal transfers committed.", &st.Committed)
	counter("ubs_transfers_failed_total", "Internal transfers failed at the source (nothing moved).", &st.Failed)
	counter("ubs_transfers_rolled_back_total", "Internal transfers compensated (refunded to the source).", &st.RolledBack)
	counter("ubs_transfers_unknown_outcomes_total", "Adapter answers that were not SUCCESS or EXPLICIT_FAIL (each a CRITICAL log; retried forever).", &st.Unknown)
	counter("ubs_transfers_cas_lost_total", "Transfer state changes refused because another driver moved first.", &st.CASLost)
	counter("ubs_transfers_stuck_total", "Stale transfers found in TARGET_PENDING or COMPENSATING by the recovery worker (MON-001).", &st.Stuck)
	counter("ubs_transfers_refund_failures_total", "Refund attempts that did not succeed.", &st.RefundFailures)
	counter("ubs_transfers_mon002_alerts_total", "MON-002: CRITICAL alerts of a transfer whose refund failed 3 times or more.", &st.MON002)
	f.gaugeFunc("ubs_transfers_halted", "1 while new internal transfers are halted by a conservation violation (MON-003).", func() float64 {
		if t.monitor.Halted() {
			return 1
		}
		return 0
	})
	f.gaugeFunc("ubs_conservation_violations_total", "FUNDING+SPOT conservation check failures (MON-003).", func() float64 {
		return float64(t.monitor.Violations())
	})
}

// spotReader is the core side of the conservation check: totals and the
// spot operations of the transfers asked, in one read of the view.
type spotReader struct {
	pl     *journal.Pipeline
	assets []core.AssetID
}

func (r *spotReader) SpotSnapshot(_ context.Context, reqIDs []string) (transfer.SpotSnapshot, error) {
	snap := transfer.SpotSnapshot{Total: map[core.AssetID]core.Units{}, Adjustments: map[core.AssetID]core.Units{},
		Ops: make(map[string]transfer.SpotOps, len(reqIDs))}
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
			snap.Ops[reqIDs[i]] = transfer.SpotOps{Withdrawn: applied(core.KindSpotWithdraw, k),
				Deposited: applied(core.KindSpotDeposit, k), Refunded: applied(core.KindSpotRefund, k)}
		}
		return nil
	})
	return snap, err
}

// faultSet is gateway.FaultInjector over the two adapters' Faulty wrappers.
type faultSet struct{ funding, spot *transfer.Faulty }

var faultModes = map[string]transfer.Fault{
	"explicit_fail":         transfer.FaultExplicitFail,
	"timeout_after_effect":  transfer.FaultTimeoutAfterEffect,
	"timeout_before_effect": transfer.FaultTimeoutBeforeEffect,
	"network_error":         transfer.FaultNetworkError,
	"pending":               transfer.FaultPending,
	"unknown":               transfer.FaultUnknown,
	"crash_before":          transfer.FaultCrashBefore,
	"crash_after":           transfer.FaultCrashAfter,
}

func (f *faultSet) Inject(adapter, op, mode string, count int) error {
	var a *transfer.Faulty
	switch adapter {
	case "funding":
		a = f.funding
	case "spot":
		a = f.spot
	default:
		return fmt.Errorf("adapter must be funding or spot")
	}
	o := transfer.Op(op)
	if o != transfer.OpWithdraw && o != transfer.OpDeposit && o != transfer.OpRefund {
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
