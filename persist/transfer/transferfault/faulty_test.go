package transferfault_test

import (
	"context"
	"testing"

	"github.com/ubscore/ubscore/persist/transfer/fakespot"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/transferfault"
	"github.com/ubscore/ubscore/persist/transfer/ulid"
)

// An injected explicit failure sticks to its (op, req_id) after the fault
// is used up (the adapter contract: a refusal never turns into a success),
// and is not injected for an operation the inner side already performed.
func TestFaultyKeepsTheContract(t *testing.T) {
	ctx := context.Background()
	spot := fakespot.New()
	spot.Credit(7, 1, 100)
	f := transferfault.New(spot)
	ids := ulid.NewGen()
	a, _ := ids.New()
	b, _ := ids.New()

	f.Inject(model.OpWithdraw, model.FaultExplicitFail, 1)
	if o := f.Withdraw(ctx, a, 7, 1, 10); o.Kind != model.ExplicitFail || o.Code != string(model.CodeInjected) {
		t.Fatalf("armed explicit failure: %v", o)
	}
	if o := f.Withdraw(ctx, a, 7, 1, 10); o.Kind != model.ExplicitFail {
		t.Fatalf("the repeat of a refused operation: %v, want the refusal again", o)
	}
	if got := spot.Balance(7, 1); got != 100 {
		t.Fatalf("a refused withdraw moved funds: balance %d", got)
	}

	if o := f.Withdraw(ctx, b, 7, 1, 10); o.Kind != model.Success {
		t.Fatalf("unarmed withdraw: %v", o)
	}
	f.Inject(model.OpWithdraw, model.FaultExplicitFail, 1)
	if o := f.Withdraw(ctx, b, 7, 1, 10); o.Kind != model.Success {
		t.Fatalf("explicit failure injected over a performed withdraw: %v", o)
	}
	if got := spot.Balance(7, 1); got != 90 || f.Calls(model.OpWithdraw) != 4 {
		t.Fatalf("balance %d, calls %d; want 90 and 4", got, f.Calls(model.OpWithdraw))
	}
}

// Draw hands out an armed fault n times, then none; Die calls Crash.
func TestFaultyDrawsAndDies(t *testing.T) {
	f := transferfault.New(nil)
	f.Inject(model.OpDeposit, model.FaultTimeoutAfterEffect, 2)
	for i, want := range []model.Fault{model.FaultTimeoutAfterEffect, model.FaultTimeoutAfterEffect, model.FaultNone} {
		if got := f.Draw(model.OpDeposit, "r"); got != want {
			t.Fatalf("draw %d: %v, want %v", i, got, want)
		}
	}
	died := false
	f.Crash = func() { died = true }
	f.Die()
	if !died {
		t.Fatal("Die did not call Crash")
	}
}
