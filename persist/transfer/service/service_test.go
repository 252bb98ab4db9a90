package service

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// startLog keeps the attributes of the service's start record.
type startLog struct {
	mu    sync.Mutex
	attrs map[string]any
}

func (h *startLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *startLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Message == "internal transfers" {
		h.attrs = map[string]any{}
		r.Attrs(func(a slog.Attr) bool { h.attrs[a.Key] = a.Value.Any(); return true })
	}
	return nil
}
func (h *startLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *startLog) WithGroup(string) slog.Handler      { return h }

// TestServiceRunsTheOnePathWithFaults (issue 34): the service a server
// wires, with fault injection on, runs the one path: a FUNDING
// fault armed through /admin/v1/faults' injector fires inside the fused
// transaction of the transfer's first step (the injected refusal is
// recorded in transfer_operations with FAILED, as only a fault inside the
// batch transaction can be), a SPOT fault around the SPOT adapter, and a
// transfer without faults commits; the metrics are exported.
func TestServiceRunsTheOnePathWithFaults(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := persist.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pl, _ := startSpot(t, core.Config{})
	logs := &startLog{}
	var migrated atomic.Bool
	migrated.Store(true)
	var jobRan atomic.Bool
	usdt := model.AssetConfig{ID: 1, Symbol: "USDT", Precision: 6, MinTransfer: 1, MaxTransfer: 1_000_000_000_000,
		Status: model.AssetActive, InternalTransferEnabled: true}
	s, err := New(Config{Pool: pool, Pipeline: pl, Migrated: &migrated, Assets: []model.AssetConfig{usdt},
		StaleAfter: time.Second, FaultInjection: true, Jobs: []func(context.Context){func(context.Context) { jobRan.Store(true) }},
		Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Close)
	logs.mu.Lock()
	start := logs.attrs
	logs.mu.Unlock()
	if start["fault_injection"] != true {
		t.Fatalf("start log %v, want fault injection on", start)
	}
	reg := prometheus.NewRegistry()
	s.Register(reg)
	if n, err := reg.Gather(); err != nil || len(n) < 10 {
		t.Fatalf("metrics: %d families, %v", len(n), err)
	}

	const user = core.UserID(9)
	if _, err := s.Deposit(ctx, "dep-1", user, 1, 1_000_000); err != nil {
		t.Fatal(err)
	}
	caller := model.Caller{Authenticated: true, UserID: user}
	create := func(from, to string) transfer.Transfer {
		t.Helper()
		r, err := s.Create(ctx, caller, model.Request{From: from, To: to, Asset: "USDT", Amount: "0.1"})
		if err != nil {
			t.Fatal(err)
		}
		return r.Transfer
	}
	if err := s.Faults().Inject("funding", "withdraw", "explicit_fail", 1); err != nil {
		t.Fatal(err)
	}
	refused := create("FUNDING", "SPOT")
	var rec string
	if err := pool.QueryRow(ctx, `SELECT result || '(' || COALESCE(code, '') || ')' FROM transfer_operations
		WHERE req_id = $1 AND op = 'withdraw'`, refused.ReqID).Scan(&rec); err != nil || refused.State != transfer.Failed ||
		rec != "EXPLICIT_FAIL(INJECTED)" {
		t.Fatalf("an injected FUNDING refusal: %s, record %q (%v); want FAILED with the refusal recorded in its transaction",
			refused.State, rec, err)
	}
	// The one path: the fault source the injector arms is the one of the
	// Batcher the coordinator's steps run on, and the refusal it injected
	// was decided inside the fused transaction that wrote the transfer's
	// state (one transaction: the same xmin), not by a call of its own.
	var same bool
	if err := pool.QueryRow(ctx, `SELECT t.xmin = o.xmin FROM transfers_tb t JOIN transfer_operations o
		ON o.req_id = t.req_id AND o.op = 'withdraw' WHERE t.req_id = $1`, refused.ReqID).Scan(&same); err != nil || !same {
		t.Fatalf("the injected refusal and the FAILED state: same transaction %v (%v), want true", same, err)
	}
	if err := s.Faults().Inject("spot", "deposit", "explicit_fail", 1); err != nil {
		t.Fatal(err)
	}
	if back := create("FUNDING", "SPOT"); back.State != transfer.RolledBack {
		t.Fatalf("an injected SPOT refusal: %s, want ROLLED_BACK", back.State)
	}
	if ok := create("FUNDING", "SPOT"); ok.State != transfer.Committed {
		t.Fatalf("without faults: %s, want COMMITTED", ok.State)
	}
	if b, err := s.FundingBalances(ctx, user); err != nil || b[1].Available != 900_000 {
		t.Fatalf("FUNDING %+v %v, want 900000 (one transfer moved)", b, err)
	}
	for deadline := time.Now().Add(10 * time.Second); !jobRan.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // Config.Jobs run once the tables exist
			t.Fatal("Config.Jobs did not run")
		}
	}
}
