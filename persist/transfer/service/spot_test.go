package service

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// startSpot starts a pipeline with asset 1 (USDT, 6 decimals) installed
// (closed when the test ends) and a SPOT adapter over it.
func startSpot(t *testing.T, cc core.Config) (*journal.Pipeline, *SpotAdapter) {
	t.Helper()
	pl, err := journal.Start(journal.Config{Dir: t.TempDir(), ReadView: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Core: cc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Close() })
	r := journal.NewReply()
	c := core.Command{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 6}
	if _, err := pl.Submit(&c, r); err != nil || pl.Wait(r) != nil || r.Result().Code != core.OK {
		t.Fatalf("config asset: %v %v", err, r.Result().Code)
	}
	return pl, NewSpotAdapter(pl, 5*time.Second)
}

// TestSpotAdapter: the SPOT side of internal transfers over the real
// pipeline — success, idempotent repeats, certain refusals as EXPLICIT_FAIL,
// a refund that undoes a withdraw once, and the account state from the view.
func TestSpotAdapter(t *testing.T) {
	_, a := startSpot(t, core.Config{})
	ctx := context.Background()
	const user, usdt = core.UserID(5), core.AssetID(1)
	want := func(what string, got model.Outcome, kind model.OutcomeKind, code string) {
		t.Helper()
		if got.Kind != kind || (code != "" && got.Code != code) {
			t.Fatalf("%s: %v, want %v(%s)", what, got, kind, code)
		}
	}
	bal := func() core.Units {
		st, err := a.AccountState(ctx, user, usdt)
		if err != nil {
			t.Fatal(err)
		}
		return st.Available
	}
	want("deposit", a.Deposit(ctx, "01JDEP00000000000000000001", user, usdt, 100), model.Success, "")
	want("deposit repeat", a.Deposit(ctx, "01JDEP00000000000000000001", user, usdt, 100), model.Success, "")
	if b := bal(); b != 100 {
		t.Fatalf("balance after a repeated deposit: %d, want 100", b)
	}
	want("withdraw too much", a.Withdraw(ctx, "01JWD000000000000000000001", user, usdt, 1000), model.ExplicitFail, "INSUFFICIENT_BALANCE")
	want("withdraw", a.Withdraw(ctx, "01JWD000000000000000000002", user, usdt, 60), model.Success, "")
	want("refund", a.Refund(ctx, "01JWD000000000000000000002", user, usdt, 60), model.Success, "")
	want("refund repeat", a.Refund(ctx, "01JWD000000000000000000002", user, usdt, 60), model.Success, "")
	if b := bal(); b != 100 {
		t.Fatalf("balance after withdraw + refund (repeated): %d, want 100", b)
	}
	want("refund without withdraw", a.Refund(ctx, "01JWD000000000000000000009", user, usdt, 5), model.ExplicitFail, "REFUND_WITHOUT_WITHDRAW")
	st, err := a.AccountState(ctx, user, usdt)
	if err != nil || !st.Exists || st.Status != model.Active {
		t.Fatalf("account state %+v %v", st, err)
	}
	if st, _ := a.AccountState(ctx, 99, usdt); st.Exists || st.Available != 0 {
		t.Fatalf("unknown user: %+v", st)
	}
}

// TestSpec5_SpotAdapterWhileCoreHalted: while the core is halted a new
// deposit or withdraw is a recorded CORE_HALTED refusal, hence
// EXPLICIT_FAIL (the transfer compensates instead of retrying forever, and
// its retry gets the same answer); a refund is refused unrecorded, hence
// retried until the core is resolved; the account state says CORE_HALTED
// so new transfers are refused before FUNDING moves.
func TestSpec5_SpotAdapterWhileCoreHalted(t *testing.T) {
	pl, a := startSpot(t, core.Config{AllowFaults: true})
	ctx := context.Background()
	const user, usdt = core.UserID(5), core.AssetID(1)
	if o := a.Deposit(ctx, "01JDEP00000000000000000001", user, usdt, 100); o.Kind != model.Success {
		t.Fatal(o)
	}
	if o := a.Withdraw(ctx, "01JWD000000000000000000002", user, usdt, 60); o.Kind != model.Success {
		t.Fatal(o)
	}
	r := journal.NewReply()
	trip := core.Command{Kind: core.KindBreakerTrip, Flags: uint8(core.ReasonManualHalt)}
	if _, err := pl.Submit(&trip, r); err != nil || pl.Wait(r) != nil || r.Result().Code != core.OK {
		t.Fatalf("trip: %v %v", err, r.Result().Code)
	}
	for i := 0; i < 2; i++ {
		if o := a.Deposit(ctx, "01JDEP00000000000000000003", user, usdt, 7); o.Kind != model.ExplicitFail || o.Code != "CORE_HALTED" {
			t.Fatalf("deposit while halted (try %d): %v", i, o)
		}
	}
	if o := a.Withdraw(ctx, "01JWD000000000000000000004", user, usdt, 7); o.Kind != model.ExplicitFail {
		t.Fatalf("withdraw while halted: %v", o)
	}
	if o := a.Refund(ctx, "01JWD000000000000000000002", user, usdt, 60); o.Kind != model.Unknown || o.Code != "CORE_HALTED" {
		t.Fatalf("refund while halted: %v", o)
	}
	if st, err := a.AccountState(ctx, user, usdt); err != nil || st.Unavailable != model.CodeCoreHalted {
		t.Fatalf("account state %+v %v", st, err)
	}
	resume := core.Command{Kind: core.KindResumeCore, User: 1000}
	if _, err := pl.Submit(&resume, r); err != nil || pl.Wait(r) != nil || r.Result().Code != core.OK {
		t.Fatalf("resume: %v %v", err, r.Result().Code)
	}
	if o := a.Refund(ctx, "01JWD000000000000000000002", user, usdt, 60); o.Kind != model.Success {
		t.Fatalf("refund after the resolution: %v", o)
	}
	if o := a.Deposit(ctx, "01JDEP00000000000000000003", user, usdt, 7); o.Kind != model.ExplicitFail {
		t.Fatalf("the recorded refusal changed: %v", o)
	}
}
