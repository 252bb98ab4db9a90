package transfer

// These tests crash transfers at every point of §10.5 (CRA-001..006) and
// let the recovery Worker finish them: the outcome is the same as without
// the crash, effects happen once (IDP-004, FND-004), and the conservation
// invariant holds to the unit (INV-004). The Worker resumes only transfers
// older than its stale threshold.

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/transferfault"
)

// ageAll moves every transfer's updated_at into the past.
func (h *harness) ageAll(d time.Duration) {
	h.t.Helper()
	if _, err := h.pool.Exec(context.Background(),
		`UPDATE transfers_tb SET updated_at = updated_at - $1::interval`, d); err != nil {
		h.t.Fatal(err)
	}
}

func TestCRA001to006_WorkerRecovers(t *testing.T) {
	type crash struct {
		id      string
		state   State
		effects []model.Op // adapter effects that happened before the crash
		want    State
	}
	crashes := []crash{
		{"CRA-001 after INIT", Init, nil, Committed},
		{"CRA-002 SOURCE_PENDING before call", SourcePending, nil, Committed},
		{"CRA-003 SOURCE_PENDING after call", SourcePending, []model.Op{model.OpWithdraw}, Committed},
		{"CRA-004 SOURCE_DONE", SourceDone, []model.Op{model.OpWithdraw}, Committed},
		{"CRA-005 TARGET_PENDING before call", TargetPending, []model.Op{model.OpWithdraw}, Committed},
		{"CRA-005 TARGET_PENDING after call", TargetPending, []model.Op{model.OpWithdraw, model.OpDeposit}, Committed},
		{"CRA-006 COMPENSATING before refund", Compensating, []model.Op{model.OpWithdraw}, RolledBack},
		{"CRA-006 COMPENSATING after refund", Compensating, []model.Op{model.OpWithdraw, model.OpRefund}, RolledBack},
	}
	h := newHarness(t)
	ctx := context.Background()
	const amount = 1_000
	type made struct {
		c    crash
		tr   Transfer
		user UserID
	}
	var all []made
	for i, c := range crashes {
		for _, from := range []model.AccountType{model.AccountFunding, model.AccountSpot} {
			user := UserID(100 + 2*i)
			if from == model.AccountSpot {
				user++
			}
			to := model.AccountSpot
			if from == model.AccountSpot {
				to = model.AccountFunding
			}
			h.deposit(user, usdt, 10_000)
			h.spot.Credit(user, usdt, 10_000)
			tr := h.insertAt(user, from, to, usdt, amount, c.state)
			for _, op := range c.effects {
				side, target := model.Side(h.funding), model.Side(h.spot)
				if from == model.AccountSpot {
					side, target = h.spot, h.funding
				}
				if op == model.OpDeposit {
					side = target
				}
				if o := call(ctx, side, op, tr); o.Kind != model.Success {
					t.Fatalf("%s: setting up %s: %s", c.id, op, o)
				}
			}
			all = append(all, made{c, tr, user})
		}
	}
	// Fresh transfers are not touched under the default threshold.
	w := NewWorker(h.coord, WorkerConfig{})
	if n, err := w.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("worker resumed %d fresh transfers (%v)", n, err)
	}
	h.ageAll(2 * time.Minute)
	for pass := 0; pass < 3; pass++ { // IDP-004: repeated recovery passes change nothing more
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range all {
		tr := h.get(m.tr.ReqID)
		if tr.State != m.c.want {
			t.Errorf("%s %s->%s: %s, want %s", m.c.id, m.tr.From, m.tr.To, tr.State, m.c.want)
			continue
		}
		wantF, wantS := Units(10_000), Units(10_000)
		if m.c.want == Committed && m.tr.From == model.AccountFunding {
			wantF, wantS = 10_000-amount, 10_000+amount
		} else if m.c.want == Committed {
			wantF, wantS = 10_000+amount, 10_000-amount
		}
		if f, s := h.fundingBalance(m.user, usdt), h.spot.Balance(m.user, usdt); f != wantF || s != wantS {
			t.Errorf("%s %s->%s: funding %d spot %d, want %d %d", m.c.id, m.tr.From, m.tr.To, f, s, wantF, wantS)
		}
	}
	h.conserved(usdt) // INV-004
}

var seedFlag = flag.Uint64("seed", 0, "replay TestCrashAbandonedCoordinator with this seed")

type cancelKey struct{}

// abandoner cancels the creating request's context right after the adapter
// call number `at` of a transfer (the client went away / the process is
// shutting down), optionally hiding that call's outcome behind a TIMEOUT.
type abandoner struct {
	model.Side
	at     model.Op
	hide   bool // report TIMEOUT after the effect
	before bool // report TIMEOUT without the effect
}

func (a *abandoner) do(ctx context.Context, op model.Op, id string, u UserID, as AssetID, n Units) model.Outcome {
	var o model.Outcome
	if op == a.at && a.before {
		o = model.Outcome{Kind: model.Timeout}
	} else {
		o = call(ctx, a.Side, op, Transfer{ReqID: id, UserID: u, Asset: as, Amount: n})
	}
	if op == a.at {
		if cancel, ok := ctx.Value(cancelKey{}).(context.CancelFunc); ok {
			cancel()
		}
		if a.hide {
			o = model.Outcome{Kind: model.Timeout}
		}
	}
	return o
}

func (a *abandoner) Withdraw(ctx context.Context, id string, u UserID, as AssetID, n Units) model.Outcome {
	return a.do(ctx, model.OpWithdraw, id, u, as, n)
}
func (a *abandoner) Deposit(ctx context.Context, id string, u UserID, as AssetID, n Units) model.Outcome {
	return a.do(ctx, model.OpDeposit, id, u, as, n)
}
func (a *abandoner) Refund(ctx context.Context, id string, u UserID, as AssetID, n Units) model.Outcome {
	return a.do(ctx, model.OpRefund, id, u, as, n)
}

// TestCrashAbandonedCoordinator (FND-004, INV-004, IDP-004): seeded random
// transfers, each abandoned by its coordinator between two steps (context
// cancelled at a chosen adapter call, its outcome possibly lost), some
// with an explicit target refusal; a Worker in a fresh coordinator finishes
// every one and the invariant holds to the unit, per user and in total.
// A SPOT call is abandoned by a wrapper of the SPOT side; a FUNDING call,
// made inside a fused step's transaction, by the FUNDING faults injected
// there: the process "dies" (the request's context is cancelled) after its
// COMMIT, the answer lost, or before it, nothing committed.
func TestCrashAbandonedCoordinator(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if *seedFlag != 0 {
		seed = *seedFlag
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	h := newHarness(t)
	var abandon context.CancelFunc // the Create being abandoned (one at a time)
	h.fundF.Crash = func() { abandon() }
	const users, perUser = 6, 8
	for u := UserID(1); u <= users; u++ {
		h.deposit(u, usdt, 50_000_000)
		h.spot.Credit(u, usdt, 50_000_000)
	}
	var ids []string
	refused := map[string]bool{} // a target refusal was injected (it may be lost with its answer)
	for i := 0; i < users*perUser; i++ {
		u := UserID(1 + rng.IntN(users))
		from, to := "FUNDING", "SPOT"
		if rng.IntN(2) == 0 {
			from, to = "SPOT", "FUNDING"
		}
		ops := []model.Op{model.OpWithdraw, model.OpDeposit, model.OpRefund}
		ab := &abandoner{at: ops[rng.IntN(3)]}
		switch rng.IntN(3) {
		case 1:
			ab.hide = true
		case 2:
			ab.before = true
		}
		refuse := rng.IntN(4) == 0 // the target refuses explicitly: compensation
		spot := transferfault.New(h.spot)
		if refuse {
			if to == "SPOT" {
				spot.Inject(model.OpDeposit, model.FaultExplicitFail, 1)
			} else {
				h.fundF.Inject(model.OpDeposit, model.FaultExplicitFail, 1)
			}
		}
		// The chosen op's side abandons the request.
		var ss model.Side = spot
		onSource := ab.at != model.OpDeposit
		if (from == "FUNDING") == onSource {
			f := model.FaultCrashAfter // the effect commits; its answer, and the request, are lost
			if ab.before {
				f = model.FaultCrashBefore
			}
			h.fundF.Inject(ab.at, f, 1)
		} else {
			ab.Side, ss = spot, ab
		}
		c := h.newCoordinator(func(cfg *Config) { cfg.Spot, cfg.MaxWait = ss, 50*time.Millisecond })
		ctx, cancel := context.WithCancel(context.Background())
		abandon = cancel
		ctx = context.WithValue(ctx, cancelKey{}, cancel)
		r, err := c.Create(ctx, model.Caller{Authenticated: true, UserID: u},
			model.Request{From: from, To: to, Asset: "USDT", Amount: fmt.Sprintf("0.%06d", 1+rng.IntN(999_999))})
		cancel()
		h.fundF.Clear() // a fault the request did not reach is not left to the next one
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		ids = append(ids, r.Transfer.ReqID)
		refused[r.Transfer.ReqID] = refuse
	}
	abandoned := 0
	for _, id := range ids {
		if !h.get(id).State.Terminal() {
			abandoned++
		}
	}
	t.Logf("%d of %d transfers left unfinished by their coordinator", abandoned, len(ids))
	// Recovery: a fresh coordinator (plain sides), several passes.
	w := NewWorker(h.newCoordinator(nil), WorkerConfig{StaleAfter: time.Nanosecond})
	for pass := 0; pass < 4; pass++ {
		if _, err := w.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	want := map[UserID][2]Units{} // expected final funding, spot, from the final states
	for u := UserID(1); u <= users; u++ {
		want[u] = [2]Units{50_000_000, 50_000_000}
	}
	for _, id := range ids {
		tr := h.get(id)
		switch {
		case tr.State == RolledBack && refused[id]:
		case tr.State == Failed && tr.ErrorMessage == msgNotRecorded: // died before its first COMMIT: nothing moved
		case tr.State == Committed:
			w := want[tr.UserID]
			if tr.From == model.AccountFunding {
				w[0], w[1] = w[0]-tr.Amount, w[1]+tr.Amount
			} else {
				w[0], w[1] = w[0]+tr.Amount, w[1]-tr.Amount
			}
			want[tr.UserID] = w
		default: // unfinished, or rolled back without any refusal
			t.Fatalf("seed %d: %s ended %s (%s), refused=%v", seed, id, tr.State, tr.ErrorMessage, refused[id])
		}
	}
	for u, w := range want {
		if f, s := h.fundingBalance(u, usdt), h.spot.Balance(u, usdt); f != w[0] || s != w[1] {
			t.Errorf("seed %d: user %d funding %d spot %d, want %d %d", seed, u, f, s, w[0], w[1])
		}
	}
	h.conserved(usdt)
}

// TestWorkerRun: Run scans at start and periodically until cancelled.
func TestWorkerRun(t *testing.T) {
	h := newHarness(t)
	h.deposit(7, usdt, 10_000)
	tr := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 500, SourcePending)
	w := NewWorker(h.newCoordinator(nil), WorkerConfig{StaleAfter: 20 * time.Millisecond, Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitFor(t, "worker commits the stale transfer", func() bool { return h.get(tr.ReqID).State == Committed })
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	h.conserved(usdt)
}

// TestWorkerResumesInterruptedAtStart (issue 20): the transfers a previous
// process left mid-flight are resumed by the worker's first scan at once,
// not after StaleAfter (1 h here), and without MON-001 "stuck" alerts: the
// process that owned them is gone, nothing is stuck yet. More than one
// batch of them is resumed.
func TestWorkerResumesInterruptedAtStart(t *testing.T) {
	h := newHarness(t)
	var left []Transfer
	for i, st := range []State{Init, SourcePending, SourceDone, TargetPending, TargetPending} {
		user := UserID(300 + i)
		h.deposit(user, usdt, 10_000)
		h.spot.Credit(user, usdt, 10_000)
		left = append(left, h.insertAt(user, model.AccountFunding, model.AccountSpot, usdt, 500, st))
	}
	// TARGET_PENDING after the deposit happened: the worker must not deposit twice.
	if o := call(context.Background(), h.funding, model.OpWithdraw, left[3]); o.Kind != model.Success {
		t.Fatal(o)
	}
	if o := call(context.Background(), h.spot, model.OpDeposit, left[3]); o.Kind != model.Success {
		t.Fatal(o)
	}
	for _, i := range []int{2, 4} { // SOURCE_DONE and TARGET_PENDING before the deposit: withdrawn
		if o := call(context.Background(), h.funding, model.OpWithdraw, left[i]); o.Kind != model.Success {
			t.Fatal(o)
		}
	}
	w := NewWorker(h.newCoordinator(nil), WorkerConfig{StaleAfter: time.Hour, Batch: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for _, tr := range left {
		waitFor(t, "the interrupted transfer "+tr.State.String()+" committed", func() bool { return h.get(tr.ReqID).State == Committed })
	}
	cancel()
	<-done
	if n := h.crit.N.Load(); n != 0 {
		t.Fatalf("%d CRITICAL alerts for transfers resumed at start", n)
	}
	for i := range left {
		if f, s := h.fundingBalance(UserID(300+i), usdt), h.spot.Balance(UserID(300+i), usdt); f != 9_500 || s != 10_500 {
			t.Errorf("user %d: funding %d spot %d, want 9500 10500", 300+i, f, s)
		}
	}
	h.conserved(usdt)
}
