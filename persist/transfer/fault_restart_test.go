package transfer

// fault_restart_test.go proves that an injected explicit failure never
// refuses an operation the inner adapter performed before a restart (a new
// Faulty has no memory of it; Performed, read from the durable record, does).

import (
	"context"
	"testing"

	"github.com/ubscore/ubscore/persist/transfer/fakespot"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/transferfault"
	"github.com/ubscore/ubscore/persist/transfer/ulid"
)

func TestFaultyNeverRefusesWhatWasPerformed(t *testing.T) {
	ctx := context.Background()
	gen := ulid.NewGen()
	req1, err1 := gen.New()
	req2, err2 := gen.New()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	spot := fakespot.New()
	spot.Credit(7, 1, 100)
	// Before the "restart": the deposit is performed.
	if o := spot.Deposit(ctx, req1, 7, 1, 40); o.Kind != model.Success {
		t.Fatalf("deposit: %+v", o)
	}
	performed := func(_ context.Context, op model.Op, reqID string) (bool, error) {
		return op == model.OpDeposit && reqID == req1, nil
	}

	// After it: a fresh Faulty armed with an explicit failure.
	f := transferfault.New(spot)
	f.Performed = performed
	f.Inject(model.OpDeposit, model.FaultExplicitFail, 2)
	if o := f.Deposit(ctx, req1, 7, 1, 40); o.Kind != model.Success {
		t.Fatalf("a performed deposit was refused after the restart: %+v", o)
	}
	// The fault still applies to an operation never performed.
	if o := f.Deposit(ctx, req2, 7, 1, 5); o.Kind != model.ExplicitFail || o.Code != string(model.CodeInjected) {
		t.Fatalf("an unperformed deposit: %+v, want the injected failure", o)
	}
	if got := spot.Balance(7, 1); got != 140 {
		t.Fatalf("balance %d, want 140 (req-1 once, req-2 refused)", got)
	}
}
