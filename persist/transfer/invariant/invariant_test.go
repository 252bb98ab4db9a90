package invariant

// These tests prove the conservation check (spec 7.2, MON-003) exact: OK
// after normal, failed and rolled-back transfers (INV-001..003), with funds
// stuck in flight in every state, with transfers moving between its two
// reads and under heavy concurrency (never a false violation); and that it
// catches money from nothing, by the sums (a balance changed behind the
// ledger's back, a rolled-back transfer whose deposit also landed) and by
// the FSM anomalies the sums cannot see, halting the monitor until Resume.

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/fakespot"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/testkit"
	"github.com/ubscore/ubscore/persist/transfer/transferfault"
	"github.com/ubscore/ubscore/persist/transfer/transfertest"
)

// checkOK runs CheckInvariant over every asset and fails unless it is OK.
func checkOK(h *transfertest.Harness) InvariantReport {
	h.T.Helper()
	rep, err := CheckInvariant(context.Background(), h.Pool, FakeSpotReader{h.Spot}, nil)
	if err != nil {
		h.T.Fatal(err)
	}
	if !rep.OK {
		h.T.Fatalf("invariant violated: %s", describe(rep))
	}
	return rep
}

func describe(rep InvariantReport) string {
	s := ""
	for _, a := range rep.Assets {
		s += "\n  asset " + itoa(int64(a.Asset)) + ": funding " + a.Funding.String() + " + spot " + a.Spot.String() +
			" + in-flight " + a.InFlight.String() + " - deposits " + a.Deposits.String() + " - adjustments " +
			a.Adjustments.String() + " = " + a.Diff.String() + " (fsm in-flight " + a.InFlightFSM.String() + ")"
	}
	for _, x := range rep.Anomalies {
		s += "\n  anomaly " + x.ReqID + " " + x.State.String() + ": " + x.Reason
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// assetOf returns the report's line for asset.
func assetOf(t *testing.T, rep InvariantReport, asset transfer.AssetID) AssetBalance {
	t.Helper()
	for _, a := range rep.Assets {
		if a.Asset == asset {
			return a
		}
	}
	t.Fatalf("asset %d not in the report", asset)
	return AssetBalance{}
}

func wantInFlight(t *testing.T, rep InvariantReport, asset transfer.AssetID, inFlight, fsm int64) {
	t.Helper()
	a := assetOf(t, rep, asset)
	if a.InFlight.Int64() != inFlight || a.InFlightFSM.Int64() != fsm {
		t.Fatalf("asset %d: in flight %s (fsm %s), want %d (%d)", asset, a.InFlight, a.InFlightFSM, inFlight, fsm)
	}
}

func TestInvariantAfterNormalFailedRolledBack(t *testing.T) {
	h := transfertest.New(t)
	ctx := context.Background()
	checkOK(h) // empty
	h.Deposit(7, usdt, 10_000_000)
	h.Deposit(7, btc, 1)
	h.Spot.Credit(7, btc, 500_000_000) // an adjustment into SPOT
	rep := checkOK(h)
	if a := assetOf(t, rep, btc); a.Adjustments.Int64() != 500_000_000 || a.Spot.Int64() != 500_000_000 || a.Funding.Int64() != 1 {
		t.Fatalf("btc terms %+v", a)
	}
	for _, step := range []struct {
		name string
		run  func() transfer.Result
		want transfer.State
	}{
		{"commit F->S", func() transfer.Result { return h.Create(h.Coord, 7, "FUNDING", "SPOT", "USDT", "2.5", "") }, transfer.Committed},
		{"commit S->F", func() transfer.Result { return h.Create(h.Coord, 7, "SPOT", "FUNDING", "BTC", "3", "") }, transfer.Committed},
		{"source refuses", func() transfer.Result {
			h.FundF.Inject(model.OpWithdraw, model.FaultExplicitFail, 1)
			return h.Create(h.Coord, 7, "FUNDING", "SPOT", "USDT", "1", "")
		}, transfer.Failed},
		{"target refuses, F->S rolled back", func() transfer.Result {
			h.SpotF.Inject(model.OpDeposit, model.FaultExplicitFail, 1)
			return h.Create(h.Coord, 7, "FUNDING", "SPOT", "USDT", "1", "")
		}, transfer.RolledBack},
		{"target refuses, S->F rolled back", func() transfer.Result {
			h.FundF.Inject(model.OpDeposit, model.FaultExplicitFail, 1)
			return h.Create(h.Coord, 7, "SPOT", "FUNDING", "USDT", "0.5", "")
		}, transfer.RolledBack},
	} {
		if r := step.run(); r.Transfer.State != step.want {
			t.Fatalf("%s: state %s, want %s", step.name, r.Transfer.State, step.want)
		}
		rep := checkOK(h)
		for _, a := range rep.Assets {
			if a.InFlight.Sign() != 0 || a.InFlightFSM.Sign() != 0 {
				t.Fatalf("%s: asset %d in flight %s / %s with every transfer terminal", step.name, a.Asset, a.InFlight, a.InFlightFSM)
			}
		}
	}
	if _, err := h.Funding.ExternalDeposit(ctx, "tx-late", 9, usdt, 42); err != nil {
		t.Fatal(err)
	}
	rep = checkOK(h)
	if a := assetOf(t, rep, usdt); a.Deposits.Int64() != 10_000_042 {
		t.Fatalf("deposits %s", a.Deposits)
	}
}

// TestInvariantStuckInFlight leaves transfers in every state where funds
// can be away from both accounts, with the operations applied or not: the
// check is exact where the spec's state sum (InFlightFSM) is not.
func TestInvariantStuckInFlight(t *testing.T) {
	h := transfertest.New(t)
	h.Deposit(7, usdt, 100_000_000)
	h.Deposit(8, usdt, 1)
	h.Spot.Credit(8, usdt, 100_000_000)
	var fsm int64
	stuck := func(name string, user transfer.UserID, from, to string, inject func(), amount string, units int64, want transfer.State, inFlight int64) string {
		t.Helper()
		inject()
		r := h.Create(h.Coord, user, from, to, "USDT", amount, "")
		h.FundF.Clear()
		h.SpotF.Clear()
		if r.Transfer.State != want {
			t.Fatalf("%s: state %s, want %s", name, r.Transfer.State, want)
		}
		if want.InFlight() {
			fsm += units
		}
		rep := checkOK(h)
		wantInFlight(t, rep, usdt, inFlight, fsm)
		return r.Transfer.ReqID
	}
	var ids []string
	// A FUNDING withdraw's COMMIT whose answer was lost: on the fused path
	// it committed TARGET_PENDING with it (SOURCE_PENDING with the withdraw
	// applied is never durable); the SPOT deposit stays unknown.
	ids = append(ids, stuck("F->S TARGET_PENDING, withdraw answer lost", 7, "FUNDING", "SPOT",
		func() {
			h.FundF.Inject(model.OpWithdraw, model.FaultTimeoutAfterEffect, 1)
			h.SpotF.Inject(model.OpDeposit, model.FaultUnknown, -1)
		}, "1", 1_000_000, transfer.TargetPending, 1_000_000))
	ids = append(ids, stuck("S->F SOURCE_PENDING", 8, "SPOT", "FUNDING",
		func() { h.SpotF.Inject(model.OpWithdraw, model.FaultTimeoutAfterEffect, -1) }, "2", 2_000_000, transfer.SourcePending, 3_000_000))
	// SOURCE_PENDING before the withdraw: nothing moved.
	ids = append(ids, stuck("F->S SOURCE_PENDING, not applied", 7, "FUNDING", "SPOT",
		func() { h.FundF.Inject(model.OpWithdraw, model.FaultNetworkError, -1) }, "4", 4_000_000, transfer.SourcePending, 3_000_000))
	// TARGET_PENDING, deposit not applied / applied.
	ids = append(ids, stuck("F->S TARGET_PENDING", 7, "FUNDING", "SPOT",
		func() { h.SpotF.Inject(model.OpDeposit, model.FaultUnknown, -1) }, "8", 8_000_000, transfer.TargetPending, 11_000_000))
	// The FUNDING deposit's COMMIT whose answer was lost: it committed
	// COMMITTED with it (TARGET_PENDING with the deposit applied is never
	// durable on the fused path).
	ids = append(ids, stuck("S->F deposit answer lost", 8, "SPOT", "FUNDING",
		func() { h.FundF.Inject(model.OpDeposit, model.FaultTimeoutAfterEffect, -1) }, "16", 16_000_000, transfer.Committed, 11_000_000))
	// COMPENSATING, refund not applied.
	ids = append(ids, stuck("S->F COMPENSATING", 8, "SPOT", "FUNDING", func() {
		h.FundF.Inject(model.OpDeposit, model.FaultExplicitFail, 1)
		h.SpotF.Inject(model.OpRefund, model.FaultPending, -1)
	}, "32", 32_000_000, transfer.Compensating, 43_000_000))
	// Every stuck transfer finishes: nothing in flight, still exact.
	for _, id := range ids {
		if tr, err := h.Coord.Drive(context.Background(), id); err != nil || !tr.State.Terminal() {
			t.Fatalf("drive %s: %s %v", id, tr.State, err)
		}
	}
	wantInFlight(t, checkOK(h), usdt, 0, 0)
}

// TestInvariantMovingBetweenReads runs transfers between the core read C
// and the Postgres snapshot P, deterministically: asked transfers that move
// on and transfers created after C, in both directions.
func TestInvariantMovingBetweenReads(t *testing.T) {
	h := transfertest.New(t)
	ctx := context.Background()
	h.Deposit(7, usdt, 100_000_000)
	h.Deposit(8, usdt, 1)
	h.Spot.Credit(8, usdt, 100_000_000)
	// Two transfers stuck before their effects, then released after C.
	h.SpotF.Inject(model.OpDeposit, model.FaultNetworkError, -1)
	a := h.Create(h.Coord, 7, "FUNDING", "SPOT", "USDT", "1", "").Transfer // TARGET_PENDING, deposit not applied
	h.SpotF.Clear()
	h.SpotF.Inject(model.OpWithdraw, model.FaultNetworkError, -1)
	b := h.Create(h.Coord, 8, "SPOT", "FUNDING", "USDT", "2", "").Transfer // SOURCE_PENDING, withdraw not applied
	h.SpotF.Clear()
	if a.State != transfer.TargetPending || b.State != transfer.SourcePending {
		t.Fatalf("states %s %s", a.State, b.State)
	}
	var snap SpotSnapshot
	asked, mark, err := underTransfersLock(ctx, h.Pool, func(asked []string) error {
		var err error
		snap, err = FakeSpotReader{h.Spot}.SpotSnapshot(ctx, asked)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 {
		t.Fatalf("asked %v, want the two moving transfers", asked)
	}
	// Between C and P: the asked ones finish, new ones start and finish or stop half-way.
	for _, id := range []string{a.ReqID, b.ReqID} {
		if tr, err := h.Coord.Drive(ctx, id); err != nil || tr.State != transfer.Committed {
			t.Fatalf("drive: %s %v", tr.State, err)
		}
	}
	h.Create(h.Coord, 7, "FUNDING", "SPOT", "USDT", "4", "")
	h.Create(h.Coord, 8, "SPOT", "FUNDING", "USDT", "8", "")
	h.FundF.Inject(model.OpDeposit, model.FaultNetworkError, -1)
	if r := h.Create(h.Coord, 8, "SPOT", "FUNDING", "USDT", "16", ""); r.Transfer.State != transfer.TargetPending {
		t.Fatalf("state %s", r.Transfer.State)
	}
	h.FundF.Clear()
	p, err := readFundingSide(ctx, h.Pool, asked, mark)
	if err != nil {
		t.Fatal(err)
	}
	rep := evaluate(nil, snap, asked, mark, p)
	if !rep.OK || rep.Moving != 5 {
		t.Fatalf("moving %d: %s", rep.Moving, describe(rep))
	}
	// C saw neither a's deposit nor b's withdraw, nor any of the later ones.
	wantInFlight(t, rep, usdt, 1_000_000-2_000_000+4_000_000-8_000_000, 16_000_000)
}

// slowSpot widens the race windows around the core read.
type slowSpot struct {
	*fakespot.Spot
	rnd *lockedRand
}

type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

func (s slowSpot) SpotSnapshot(ctx context.Context, ids []string) (SpotSnapshot, error) {
	time.Sleep(time.Duration(s.rnd.IntN(1000)) * time.Microsecond)
	snap, err := FakeSpotReader{s.Spot}.SpotSnapshot(ctx, ids)
	time.Sleep(time.Duration(s.rnd.IntN(1000)) * time.Microsecond)
	return snap, err
}

var invariantSeed = flag.Uint64("invariant-seed", 0, "seed of TestInvariantConcurrent (0: random)")

// TestInvariantConcurrent checks again and again while transfers run in
// both directions with faults (refusals, timeouts after the effect, unknown
// outcomes): never a false violation.
func TestInvariantConcurrent(t *testing.T) {
	seed := *invariantSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay: -invariant-seed=%d)", seed, seed)
	rnd := &lockedRand{r: rand.New(rand.NewPCG(seed, 0))}
	h := transfertest.New(t)
	const users = 8
	for u := transfer.UserID(1); u <= users; u++ {
		h.Deposit(u, usdt, 1_000_000_000)
		h.Deposit(u, btc, 1_000_000_000)
		h.Spot.Credit(u, usdt, 1_000_000_000)
		h.Spot.Credit(u, btc, 1_000_000_000)
	}
	spot := slowSpot{Spot: h.Spot, rnd: rnd}
	perUser := 30
	if testing.Short() {
		perUser = 10
	}
	faults := []model.Fault{model.FaultExplicitFail, model.FaultTimeoutAfterEffect, model.FaultTimeoutBeforeEffect, model.FaultUnknown}
	var done atomic.Bool
	var wg sync.WaitGroup
	for u := transfer.UserID(1); u <= users; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perUser; i++ {
				if rnd.IntN(4) == 0 { // a fault for whichever transfer calls next
					side := []*transferfault.Faulty{h.FundF, h.SpotF}[rnd.IntN(2)]
					op, f := []model.Op{model.OpWithdraw, model.OpDeposit, model.OpRefund}[rnd.IntN(3)], faults[rnd.IntN(len(faults))]
					if op == model.OpRefund && f == model.FaultExplicitFail {
						f = model.FaultUnknown // a refused refund would stay COMPENSATING forever
					}
					side.Inject(op, f, 1)
				}
				from, to := "FUNDING", "SPOT"
				if rnd.IntN(2) == 0 {
					from, to = to, from
				}
				asset := []string{"USDT", "BTC"}[rnd.IntN(2)]
				_, err := h.Coord.Create(context.Background(), model.Caller{Authenticated: true, UserID: u},
					model.Request{From: from, To: to, Asset: asset, Amount: "0.0" + itoa(int64(1+rnd.IntN(9)))})
				var e *model.Error
				if err != nil && !errors.As(err, &e) {
					t.Error(err)
					return
				}
			}
		}()
	}
	var checks, sawMoving, busy int
	var checkErr error
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		for !done.Load() {
			rep, err := CheckInvariant(context.Background(), h.Pool, spot, nil)
			if errors.Is(err, ErrTransfersBusy) { // no conclusion under load: fine, not a violation
				busy++
				continue
			}
			if err != nil {
				checkErr = err
				return
			}
			checks++
			if rep.Moving > 0 {
				sawMoving++
			}
			if !rep.OK {
				checkErr = errors.New("false violation:" + describe(rep))
				return
			}
		}
	}()
	wg.Wait()
	done.Store(true)
	<-checked
	if checkErr != nil {
		t.Fatalf("seed %d: %v", seed, checkErr)
	}
	t.Logf("%d checks, %d while transfers were moving, %d not run (lock busy)", checks, sawMoving, busy)
	if checks < 3 || sawMoving == 0 {
		t.Fatalf("seed %d: %d checks, %d with moving transfers: the test did not exercise the check", seed, checks, sawMoving)
	}
	// Finish everything: exact, nothing in flight.
	h.FundF.Clear()
	h.SpotF.Clear()
	rows, err := h.Pool.Query(context.Background(), `SELECT req_id FROM transfers_tb WHERE state NOT IN (40, -10, -30)`)
	if err != nil {
		t.Fatal(err)
	}
	var open []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		open = append(open, id)
	}
	rows.Close()
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range open {
		if tr, err := h.Coord.Drive(dctx, id); err != nil || !tr.State.Terminal() {
			t.Fatalf("drive %s: %s %v", id, tr.State, err)
		}
	}
	rep := checkOK(h)
	for _, a := range rep.Assets {
		if a.InFlight.Sign() != 0 {
			t.Fatalf("asset %d: in flight %s after every transfer ended", a.Asset, a.InFlight)
		}
	}
}

// TestInvariantFreezesTransfersDuringSpotRead: while the core is read, no
// transfer can be created or change state (the lock the exactness rests on).
func TestInvariantFreezesTransfersDuringSpotRead(t *testing.T) {
	h := transfertest.New(t)
	h.Deposit(7, usdt, 1_000_000)
	h.SpotF.Inject(model.OpDeposit, model.FaultNetworkError, -1)
	tr := h.Create(h.Coord, 7, "FUNDING", "SPOT", "USDT", "0.1", "").Transfer
	var insertErr, casErr error
	probe := spotFunc(func(ctx context.Context, ids []string) (SpotSnapshot, error) {
		pctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, _, insertErr = h.Store.Insert(pctx, transfer.Transfer{ReqID: h.NewID(), UserID: 7, From: model.AccountFunding,
			To: model.AccountSpot, Asset: usdt, Amount: 1})
		_, casErr = h.Store.Transition(pctx, tr.ReqID, transfer.TargetPending, transfer.Compensating, "")
		return FakeSpotReader{h.Spot}.SpotSnapshot(ctx, ids)
	})
	rep, err := CheckInvariant(context.Background(), h.Pool, probe, nil)
	if err != nil || !rep.OK {
		t.Fatalf("%v %s", err, describe(rep))
	}
	if !errors.Is(insertErr, context.DeadlineExceeded) || !errors.Is(casErr, context.DeadlineExceeded) {
		t.Fatalf("insert %v, CAS %v during the core read: want both blocked", insertErr, casErr)
	}
	if h.Get(tr.ReqID).State != transfer.TargetPending {
		t.Fatal("state changed during the core read")
	}
}

type spotFunc func(ctx context.Context, ids []string) (SpotSnapshot, error)

func (f spotFunc) SpotSnapshot(ctx context.Context, ids []string) (SpotSnapshot, error) {
	return f(ctx, ids)
}

// TestInvariantViolationHaltsMonitor: one unit created behind the ledger's
// back is a violation of that asset only; the monitor logs CRITICAL, counts
// it and stays halted, after the unit is gone too, until Resume.
func TestInvariantViolationHaltsMonitor(t *testing.T) {
	h := transfertest.New(t)
	ctx := context.Background()
	h.Deposit(7, usdt, 5_000_000)
	h.Deposit(7, btc, 5_000_000)
	h.Create(h.Coord, 7, "FUNDING", "SPOT", "USDT", "1", "")
	m, err := NewInvariantMonitor(MonitorConfig{Pool: h.Pool, Spot: FakeSpotReader{h.Spot}, Logger: slog.New(h.Crit)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := m.Last(); ok {
		t.Fatal("a report before any check")
	}
	if rep, err := m.CheckNow(ctx); err != nil || !rep.OK || m.Halted() {
		t.Fatalf("clean: %v halted %v %s", err, m.Halted(), describe(rep))
	}
	bump := func(d int) {
		if _, err := h.Pool.Exec(ctx, `UPDATE balances_tb SET available = available + $1 WHERE user_id = 7 AND asset_id = $2`,
			d, int32(usdt)); err != nil {
			t.Fatal(err)
		}
	}
	bump(1)
	crit := h.Crit.N.Load()
	rep, err := m.CheckNow(ctx)
	if err != nil || rep.OK {
		t.Fatalf("money from nothing not seen: %v %s", err, describe(rep))
	}
	if u, b := assetOf(t, rep, usdt), assetOf(t, rep, btc); u.OK || u.Diff.Int64() != 1 || !b.OK {
		t.Fatalf("usdt %+v btc %+v", u, b)
	}
	if !m.Halted() || m.Violations() != 1 || h.Crit.N.Load() != crit+1 {
		t.Fatalf("halted %v violations %d critical logs %d", m.Halted(), m.Violations(), h.Crit.N.Load()-crit)
	}
	bump(-1)
	if rep, err := m.CheckNow(ctx); err != nil || !rep.OK || !m.Halted() {
		t.Fatalf("after repair: ok %v halted %v (%v): the halt must wait for an operator", rep.OK, m.Halted(), err)
	}
	if last, at, ok := m.Last(); !ok || !last.OK || at.IsZero() {
		t.Fatalf("last %v %v %v", last.OK, at, ok)
	}
	m.Resume()
	if m.Halted() {
		t.Fatal("still halted after Resume")
	}
	if rep, err := m.CheckNow(ctx); err != nil || !rep.OK || m.Halted() || m.Violations() != 1 {
		t.Fatalf("after resume: %v ok %v halted %v violations %d", err, rep.OK, m.Halted(), m.Violations())
	}
}

// TestInvariantViolationRolledBackAndDeposited: a rolled-back transfer
// whose target deposit also landed is money from nothing in the sums.
func TestInvariantViolationRolledBackAndDeposited(t *testing.T) {
	h := transfertest.New(t)
	ctx := context.Background()
	h.Deposit(7, usdt, 5_000_000)
	h.SpotF.Inject(model.OpDeposit, model.FaultExplicitFail, 1)
	tr := h.Create(h.Coord, 7, "FUNDING", "SPOT", "USDT", "2", "").Transfer
	if tr.State != transfer.RolledBack {
		t.Fatalf("state %s", tr.State)
	}
	checkOK(h)
	if o := h.Spot.Deposit(ctx, tr.ReqID, 7, usdt, tr.Amount); o.Kind != model.Success { // behind the FSM's back
		t.Fatalf("deposit %s", o)
	}
	rep, err := CheckInvariant(ctx, h.Pool, FakeSpotReader{h.Spot}, []transfer.AssetID{usdt})
	if err != nil || rep.OK || len(rep.Assets) != 1 || rep.Assets[0].Diff.Int64() != 2_000_000 {
		t.Fatalf("%v %s", err, describe(rep))
	}
}

// TestInvariantAnomalyWhileMoving: a transfer in COMPENSATING whose deposit
// also landed balances the sums (withdrawn − deposited = 0), yet no correct
// execution shows it: an anomaly, a violation.
func TestInvariantAnomalyWhileMoving(t *testing.T) {
	h := transfertest.New(t)
	ctx := context.Background()
	h.Deposit(7, usdt, 5_000_000)
	h.SpotF.Inject(model.OpDeposit, model.FaultExplicitFail, 1)
	h.FundF.Inject(model.OpRefund, model.FaultNetworkError, -1)
	tr := h.Create(h.Coord, 7, "FUNDING", "SPOT", "USDT", "2", "").Transfer
	if tr.State != transfer.Compensating {
		t.Fatalf("state %s", tr.State)
	}
	wantInFlight(t, checkOK(h), usdt, 2_000_000, 2_000_000)
	if o := h.Spot.Deposit(ctx, tr.ReqID, 7, usdt, tr.Amount); o.Kind != model.Success {
		t.Fatalf("deposit %s", o)
	}
	rep, err := CheckInvariant(ctx, h.Pool, FakeSpotReader{h.Spot}, nil)
	if err != nil || rep.OK {
		t.Fatalf("%v %s", err, describe(rep))
	}
	if a := assetOf(t, rep, usdt); a.Diff.Sign() != 0 || a.OK {
		t.Fatalf("usdt %+v: the sums balance, the anomaly must fail the asset", a)
	}
	if len(rep.Anomalies) != 1 || rep.Anomalies[0].ReqID != tr.ReqID || rep.Anomalies[0].Reason != "deposited in state COMPENSATING" {
		t.Fatalf("anomalies %+v", rep.Anomalies)
	}
}

// TestInvariantCheckErrors: a core that cannot be read is no conclusion
// (an error, counted), never a violation or a halt.
func TestInvariantCheckErrors(t *testing.T) {
	h := transfertest.New(t)
	broken := spotFunc(func(context.Context, []string) (SpotSnapshot, error) { return SpotSnapshot{}, errors.New("core down") })
	m, err := NewInvariantMonitor(MonitorConfig{Pool: h.Pool, Spot: broken, Logger: slog.New(h.Crit)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CheckNow(context.Background()); err == nil || m.Halted() || m.Errors() != 1 || m.Violations() != 0 {
		t.Fatalf("err %v halted %v errors %d violations %d", err, m.Halted(), m.Errors(), m.Violations())
	}
	if _, err := NewInvariantMonitor(MonitorConfig{Pool: h.Pool}); err == nil {
		t.Fatal("monitor without a SpotReader")
	}
	// Run checks at once and stops with its context.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ok, _ := NewInvariantMonitor(MonitorConfig{Pool: h.Pool, Spot: FakeSpotReader{h.Spot}, Interval: time.Hour})
	ran := make(chan error, 1)
	go func() { ran <- ok.Run(ctx) }()
	testkit.WaitFor(t, "first check", func() bool { _, _, have := ok.Last(); return have })
	cancel()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
}

const usdt, btc = testkit.USDT, testkit.BTC
