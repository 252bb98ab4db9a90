package transfer

// These tests drive whole transfers through the Coordinator over the real
// FUNDING adapter and a fakespot.Spot with injected faults: every state flow of
// §10.4 (FSM-001..006), persist-before-call (each adapter call sees its
// announcing state already in the database), cid idempotency (ATK-010),
// concurrency (CON-001, CON-002, BAL-003) and conservation (INV-001..003).

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/transfer/fakespot"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/transferfault"
	"github.com/ubscore/ubscore/persist/transfer/ulid"
)

// observer records, for each adapter call, the transfer's state in the
// database at the moment of the call.
type observer struct {
	model.Side
	h   *harness
	mu  sync.Mutex
	log []string
}

func (o *observer) see(op model.Op, reqID string) {
	tr, err := o.h.store.Get(context.Background(), reqID)
	if err != nil {
		o.h.t.Error(err)
		return
	}
	o.mu.Lock()
	o.log = append(o.log, string(op)+"@"+tr.State.String())
	o.mu.Unlock()
}

func (o *observer) Withdraw(ctx context.Context, id string, u UserID, a AssetID, n Units) model.Outcome {
	o.see(model.OpWithdraw, id)
	return o.Side.Withdraw(ctx, id, u, a, n)
}
func (o *observer) Deposit(ctx context.Context, id string, u UserID, a AssetID, n Units) model.Outcome {
	o.see(model.OpDeposit, id)
	return o.Side.Deposit(ctx, id, u, a, n)
}
func (o *observer) Refund(ctx context.Context, id string, u UserID, a AssetID, n Units) model.Outcome {
	o.see(model.OpRefund, id)
	return o.Side.Refund(ctx, id, u, a, n)
}

func (o *observer) calls() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.log...)
}

// observed returns a coordinator whose SPOT side is observed, and the
// FUNDING calls made below the fused path (each in the transaction that
// makes its announcing state and its outcome's transitions: persist-before-
// call holds inside it, fusePlan.legal checks the chain).
func (h *harness) observed() (*Coordinator, *fundingCalls, *observer) {
	so := &observer{Side: h.spotF, h: h}
	return h.newCoordinator(func(c *Config) { c.Spot = so }), &fundingCalls{h.fundF}, so
}

// fundingCalls lists the FUNDING calls by op (withdraw, deposit, refund).
type fundingCalls struct{ f *transferfault.Faulty }

func (c *fundingCalls) calls() []string {
	var out []string
	for _, op := range []model.Op{model.OpWithdraw, model.OpDeposit, model.OpRefund} {
		for range c.f.Calls(op) {
			out = append(out, string(op))
		}
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func wantCalls(t *testing.T, side string, o interface{ calls() []string }, want ...string) {
	t.Helper()
	if got := o.calls(); !equal(got, want) {
		t.Fatalf("%s calls %v, want %v", side, got, want)
	}
}

func TestFSM001_FundingToSpot(t *testing.T) {
	h := newHarness(t)
	c, fo, so := h.observed()
	h.deposit(7, usdt, 10_000_000)
	r := h.create(c, 7, "FUNDING", "SPOT", "USDT", "2.5", "")
	if r.Transfer.State != Committed || r.Duplicate || !ulid.Valid(r.Transfer.ReqID) {
		t.Fatalf("result %+v", r)
	}
	// Persist-before-call: the SPOT deposit saw TARGET_PENDING durable.
	wantCalls(t, "funding", fo, "withdraw")
	wantCalls(t, "spot", so, "deposit@TARGET_PENDING")
	if c.Stats().CASWon.Load() != 4 { // INIT->SP->SD->TP->COMMITTED
		t.Fatalf("CAS won %d, want 4", c.Stats().CASWon.Load())
	}
	if h.fundingBalance(7, usdt) != 7_500_000 || h.spot.Balance(7, usdt) != 2_500_000 {
		t.Fatalf("funding %d spot %d", h.fundingBalance(7, usdt), h.spot.Balance(7, usdt))
	}
	h.conserved(usdt) // INV-001
}

func TestFSM002_SpotToFunding(t *testing.T) {
	h := newHarness(t)
	c, fo, so := h.observed()
	h.deposit(7, btc, 1) // the FUNDING account must exist
	h.spot.Credit(7, btc, 300_000_000)
	r := h.create(c, 7, "SPOT", "FUNDING", "BTC", "3", "")
	if r.Transfer.State != Committed {
		t.Fatalf("state %s", r.Transfer.State)
	}
	wantCalls(t, "spot", so, "withdraw@SOURCE_PENDING")
	wantCalls(t, "funding", fo, "deposit")
	if h.fundingBalance(7, btc) != 300_000_001 || h.spot.Balance(7, btc) != 0 { // BAL-002: to zero
		t.Fatalf("funding %d spot %d", h.fundingBalance(7, btc), h.spot.Balance(7, btc))
	}
	h.conserved(btc)
}

func TestFSM003_SourceFailure(t *testing.T) {
	h := newHarness(t)
	c, fo, so := h.observed()
	h.deposit(7, usdt, 1_000_000)
	h.fundF.Inject(model.OpWithdraw, model.FaultExplicitFail, 1) // refused after validation passed
	r := h.create(c, 7, "FUNDING", "SPOT", "USDT", "1", "")
	if r.Transfer.State != Failed || r.Transfer.ErrorMessage == "" {
		t.Fatalf("transfer %+v", r.Transfer)
	}
	wantCalls(t, "funding", fo, "withdraw")
	wantCalls(t, "spot", so) // the target is never called
	if h.fundingBalance(7, usdt) != 1_000_000 {
		t.Fatal("source changed")
	}
	h.conserved(usdt) // INV-002

	// The natural case: the balance left between validation and withdraw.
	h.spot.Credit(8, usdt, 100)
	h.deposit(8, usdt, 1)
	spotRace := h.newCoordinator(func(cfg *Config) {
		cfg.Spot = &drainOnWithdraw{Side: h.spotF, spot: h.spot}
	})
	r = h.create(spotRace, 8, "SPOT", "FUNDING", "USDT", "0.0001", "")
	if r.Transfer.State != Failed {
		t.Fatalf("state %s", r.Transfer.State)
	}
	h.conserved(usdt)
}

// drainOnWithdraw empties the user's SPOT balance just before the withdraw
// (an order placed in between), so the core refuses it.
type drainOnWithdraw struct {
	model.Side
	spot *fakespot.Spot
}

func (d *drainOnWithdraw) Withdraw(ctx context.Context, id string, u UserID, a AssetID, n Units) model.Outcome {
	d.spot.Credit(u, a, -d.spot.Balance(u, a))
	return d.Side.Withdraw(ctx, id, u, a, n)
}

func TestFSM004_TargetExplicitFailureCompensates(t *testing.T) {
	h := newHarness(t)
	c, fo, so := h.observed()
	h.deposit(7, usdt, 1_000_000)
	h.spotF.Inject(model.OpDeposit, model.FaultExplicitFail, 1)
	r := h.create(c, 7, "FUNDING", "SPOT", "USDT", "0.4", "")
	if r.Transfer.State != RolledBack {
		t.Fatalf("state %s", r.Transfer.State)
	}
	wantCalls(t, "funding", fo, "withdraw", "refund")
	wantCalls(t, "spot", so, "deposit@TARGET_PENDING")
	if h.fundingBalance(7, usdt) != 1_000_000 || h.spot.Balance(7, usdt) != 0 {
		t.Fatal("source not restored") // INV-003
	}
	h.conserved(usdt)

	// SPOT -> FUNDING where FUNDING refuses (row DISABLED): refunded to SPOT.
	h.deposit(9, usdt, 1)
	if err := h.funding.SetStatus(context.Background(), 9, usdt, model.Disabled); err != nil {
		t.Fatal(err)
	}
	h.spot.Credit(9, usdt, 5_000_000)
	r = h.create(c, 9, "SPOT", "FUNDING", "USDT", "5", "")
	if r.Transfer.State != RolledBack || h.spot.Balance(9, usdt) != 5_000_000 || h.fundingBalance(9, usdt) != 1 {
		t.Fatalf("state %s spot %d funding %d", r.Transfer.State, h.spot.Balance(9, usdt), h.fundingBalance(9, usdt))
	}
	h.conserved(usdt)
}

// TestFSM005_TargetUnknownNeverCompensates: every unknown kind from the
// target keeps TARGET_PENDING (no refund, CRITICAL logged, counted) until
// the target answers; then it commits, crediting once (FND-002, FND-003).
func TestFSM005_TargetUnknownNeverCompensates(t *testing.T) {
	for _, f := range []model.Fault{model.FaultTimeoutBeforeEffect, model.FaultTimeoutAfterEffect, model.FaultNetworkError, model.FaultPending, model.FaultUnknown} {
		h := newHarness(t)
		c, fo, _ := h.observed()
		h.deposit(7, usdt, 1_000_000)
		h.spotF.Inject(model.OpDeposit, f, -1)
		r := h.create(c, 7, "FUNDING", "SPOT", "USDT", "1", "")
		tr := h.get(r.Transfer.ReqID)
		if r.Transfer.State != TargetPending || tr.State != TargetPending || tr.RetryCount == 0 {
			t.Fatalf("fault %d: state %s / %s, retries %d", f, r.Transfer.State, tr.State, tr.RetryCount)
		}
		for _, call := range fo.calls() {
			if call != "withdraw" {
				t.Fatalf("fault %d: funding call %s while the target is unknown", f, call)
			}
		}
		if c.Stats().Unknown.Load() == 0 || h.crit.N.Load() == 0 {
			t.Fatalf("fault %d: unknown outcomes not counted / logged CRITICAL", f)
		}
		h.spotF.Clear()
		tr, err := c.Drive(context.Background(), tr.ReqID)
		if err != nil || tr.State != Committed {
			t.Fatalf("fault %d: after the target recovered: %s %v", f, tr.State, err)
		}
		if h.spot.Balance(7, usdt) != 1_000_000 || h.fundingBalance(7, usdt) != 0 {
			t.Fatalf("fault %d: spot %d funding %d", f, h.spot.Balance(7, usdt), h.fundingBalance(7, usdt))
		}
		h.conserved(usdt)
	}
}

// TestFSM006_CompensationFailureRetries: a refund that keeps failing stays
// COMPENSATING (never FAILED, never COMMITTED) until it succeeds.
func TestFSM006_CompensationFailureRetries(t *testing.T) {
	h := newHarness(t)
	c, _, _ := h.observed()
	h.deposit(7, usdt, 1_000_000)
	h.spotF.Inject(model.OpDeposit, model.FaultExplicitFail, 1)
	h.fundF.Inject(model.OpRefund, model.FaultNetworkError, -1)
	r := h.create(c, 7, "FUNDING", "SPOT", "USDT", "1", "")
	tr := h.get(r.Transfer.ReqID)
	if tr.State != Compensating || tr.RetryCount < 3 {
		t.Fatalf("state %s retries %d", tr.State, tr.RetryCount)
	}
	if h.fundingBalance(7, usdt) != 0 {
		t.Fatal("refunded while the refund failed")
	}
	// MON-002: from the 3rd failed refund on, counted and said; the refusal
	// that started the compensation stays in front of the retry notes.
	if n := c.Stats().MON002.Load(); n < 1 || c.Stats().RefundFailures.Load() < 3 {
		t.Fatalf("MON-002 alerts %d, refund failures %d", n, c.Stats().RefundFailures.Load())
	}
	if !strings.HasPrefix(tr.ErrorMessage, "target deposit: EXPLICIT_FAIL(INJECTED); compensation failed ") {
		t.Fatalf("error_message %q", tr.ErrorMessage)
	}
	h.conserved(usdt) // in flight: COMPENSATING counts
	h.fundF.Clear()
	tr, err := c.Drive(context.Background(), tr.ReqID)
	if err != nil || tr.State != RolledBack || h.fundingBalance(7, usdt) != 1_000_000 {
		t.Fatalf("state %s %v balance %d", tr.State, err, h.fundingBalance(7, usdt))
	}
	if code := FailureCode(tr); code != "INJECTED" {
		t.Fatalf("failure code of the rolled-back transfer %q (%q)", code, tr.ErrorMessage)
	}
	h.conserved(usdt)
}

// TestATK010_DuplicateCID: a repeated cid returns the original transfer and
// moves nothing, sequentially and when racing.
func TestATK010_DuplicateCID(t *testing.T) {
	h := newHarness(t)
	h.deposit(7, usdt, 10_000_000)
	r1 := h.create(h.coord, 7, "FUNDING", "SPOT", "USDT", "1", "order-1")
	r2 := h.create(h.coord, 7, "FUNDING", "SPOT", "USDT", "1", "order-1")
	if !r2.Duplicate || r2.Transfer.ReqID != r1.Transfer.ReqID || r2.Transfer.State != Committed {
		t.Fatalf("repeat %+v, first %+v", r2, r1)
	}
	// Another user may use the same cid.
	h.deposit(8, usdt, 1_000_000)
	if r := h.create(h.coord, 8, "FUNDING", "SPOT", "USDT", "1", "order-1"); r.Duplicate {
		t.Fatal("cid shared across users")
	}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.coord.Create(context.Background(), model.Caller{Authenticated: true, UserID: 7},
				model.Request{From: "FUNDING", To: "SPOT", Asset: "USDT", Amount: "1", CID: "order-2"})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = r.Transfer.ReqID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("racing cid made two transfers: %v", ids)
		}
	}
	waitFor(t, "order-2 committed", func() bool { return h.get(ids[0]).State == Committed })
	if h.fundingBalance(7, usdt) != 8_000_000 || h.spot.Balance(7, usdt) != 2_000_000 {
		t.Fatalf("funding %d spot %d", h.fundingBalance(7, usdt), h.spot.Balance(7, usdt))
	}
	h.conserved(usdt)
}

// TestCreateRefusals: the coordinator re-validates (layer 2) with the spec's
// codes and stores nothing for a refused request.
func TestCreateRefusals(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(7, usdt, 1_000_000)
	h.spot.Credit(8, usdt, 1_000_000)
	for _, tc := range []struct {
		user UserID
		req  model.Request
		want model.Code
	}{
		{7, model.Request{From: "FUNDING", To: "SPOT", Asset: "USDT", Amount: "2"}, model.CodeInsufficientBalance},
		{7, model.Request{UserID: 8, From: "FUNDING", To: "SPOT", Asset: "USDT", Amount: "1"}, model.CodeForbidden},
		{7, model.Request{From: "FUNDING", To: "SPOT", Asset: "DOGE", Amount: "1"}, model.CodeInvalidAsset},
		{9, model.Request{From: "FUNDING", To: "SPOT", Asset: "USDT", Amount: "1"}, model.CodeSourceAccountNotFound},
		{9, model.Request{From: "SPOT", To: "FUNDING", Asset: "USDT", Amount: "1"}, model.CodeSourceAccountNotFound},
		{8, model.Request{From: "SPOT", To: "FUNDING", Asset: "USDT", Amount: "1"}, model.CodeTargetAccountNotFound},
	} {
		_, err := h.coord.Create(ctx, model.Caller{Authenticated: true, UserID: tc.user}, tc.req)
		var e *model.Error
		if !errors.As(err, &e) || e.Code != tc.want {
			t.Errorf("%+v: %v, want %s", tc.req, err, tc.want)
		}
	}
	h.spot.SetStatus(8, model.Frozen)
	h.deposit(8, usdt, 1)
	if _, err := h.coord.Create(ctx, model.Caller{Authenticated: true, UserID: 8},
		model.Request{From: "SPOT", To: "FUNDING", Asset: "USDT", Amount: "1"}); err == nil || err.(*model.Error).Code != model.CodeAccountFrozen {
		t.Errorf("frozen SPOT source: %v", err)
	}
	var n int
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM transfers_tb`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d transfers stored for refused requests (%v)", n, err)
	}
}

// TestCON002_BAL003_ConcurrentCreates: concurrent transfers of the same
// amount are separate transfers; when together they exceed the balance,
// exactly the affordable ones commit.
func TestCON002_BAL003_ConcurrentCreates(t *testing.T) {
	h := newHarness(t)
	// Each Create drives its transfer to the end: the harness's 300 ms
	// MaxWait let one of 16 racing creates answer SOURCE_DONE on a busy
	// machine (a fresh-clone CI run under -race).
	coord := h.newCoordinator(func(cfg *Config) { cfg.MaxWait = 20 * time.Second })
	h.deposit(7, usdt, 10_000_000)
	var wg sync.WaitGroup
	results := make([]Result, 16)
	errs := make([]error, 16)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = coord.Create(context.Background(), model.Caller{Authenticated: true, UserID: 7},
				model.Request{From: "FUNDING", To: "SPOT", Asset: "USDT", Amount: "1"})
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	committed := 0
	for i, r := range results {
		var e *model.Error
		switch {
		case errs[i] == nil && r.Transfer.State == Committed:
			committed++
			if seen[r.Transfer.ReqID] {
				t.Fatal("two creates share a req_id")
			}
			seen[r.Transfer.ReqID] = true
		case errs[i] == nil && r.Transfer.State == Failed:
		case errors.As(errs[i], &e) && e.Code == model.CodeInsufficientBalance:
		default:
			t.Fatalf("create %d: %+v %v", i, r.Transfer, errs[i])
		}
	}
	if committed != 10 || h.fundingBalance(7, usdt) != 0 || h.spot.Balance(7, usdt) != 10_000_000 {
		t.Fatalf("committed %d, funding %d, spot %d", committed, h.fundingBalance(7, usdt), h.spot.Balance(7, usdt))
	}
	h.conserved(usdt)
}

// TestCON001_RacingDrivers: several coordinators resume the same transfer
// at once; each transition is won once, the effects happen once.
func TestCON001_RacingDrivers(t *testing.T) {
	h := newHarness(t)
	h.deposit(7, usdt, 1_000_000)
	for round := 0; round < 5; round++ {
		tr := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 100_000, Init)
		coords := make([]*Coordinator, 6)
		for i := range coords {
			coords[i] = h.newCoordinator(nil)
		}
		var wg sync.WaitGroup
		for _, c := range coords {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if got, err := c.Drive(ctx, tr.ReqID); err != nil || got.State != Committed {
					t.Errorf("drive: %s %v", got.State, err)
				}
			}()
		}
		wg.Wait()
		var won int64
		for _, c := range coords {
			won += c.Stats().CASWon.Load()
		}
		if won != 4 {
			t.Fatalf("round %d: %d CAS won across drivers, want 4", round, won)
		}
	}
	if h.fundingBalance(7, usdt) != 500_000 || h.spot.Balance(7, usdt) != 500_000 {
		t.Fatalf("funding %d spot %d", h.fundingBalance(7, usdt), h.spot.Balance(7, usdt))
	}
}
