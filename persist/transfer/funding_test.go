package transfer

// These tests prove the FUNDING adapter changes a balance at most once per
// (req_id, op) whatever the repetition or concurrency (IDP-001..003,
// FND-001, FND-003, CON-003/004, BAL-003), keeps its first outcome (a
// refusal never turns into a success), re-validates its inputs, and commits
// the balance change and its record atomically (FND-006).

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

func newID(t *testing.T, h *harness) string {
	t.Helper()
	id, err := h.coord.ids.New()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func wantOutcome(t *testing.T, what string, got model.Outcome, kind model.OutcomeKind, code model.Code) {
	t.Helper()
	if got.Kind != kind || (code != "" && got.Code != string(code)) {
		t.Fatalf("%s: %s, want %s(%s)", what, got, kind, code)
	}
}

func TestIDP001to003_FundingRepeatsChangeNothing(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(7, usdt, 1000)
	id := newID(t, h)
	for i := 0; i < 3; i++ { // IDP-001 / FND-001
		wantOutcome(t, "withdraw", h.funding.Withdraw(ctx, id, 7, usdt, 300), model.Success, "")
	}
	if b := h.fundingBalance(7, usdt); b != 700 {
		t.Fatalf("after 3 withdraws of one req_id: %d, want 700", b)
	}
	for i := 0; i < 3; i++ { // IDP-003
		wantOutcome(t, "refund", h.funding.Refund(ctx, id, 7, usdt, 300), model.Success, "")
	}
	if b := h.fundingBalance(7, usdt); b != 1000 {
		t.Fatalf("after 3 refunds: %d, want 1000", b)
	}
	dep := newID(t, h)
	for i := 0; i < 3; i++ { // IDP-002 / FND-003
		wantOutcome(t, "deposit", h.funding.Deposit(ctx, dep, 7, usdt, 50), model.Success, "")
	}
	if b := h.fundingBalance(7, usdt); b != 1050 {
		t.Fatalf("after 3 deposits: %d, want 1050", b)
	}
	// Same req_id and op with other parameters: never an effect, never a
	// business failure (that could trigger compensation).
	wantOutcome(t, "conflicting repeat", h.funding.Withdraw(ctx, id, 7, usdt, 301), model.Unknown, model.CodeReqIDConflict)
}

func TestFundingRefusalsAreSticky(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(7, usdt, 100)
	id := newID(t, h)
	wantOutcome(t, "BAL-001 withdraw", h.funding.Withdraw(ctx, id, 7, usdt, 101), model.ExplicitFail, model.CodeInsufficientBalance)
	h.deposit(7, usdt, 1000)
	wantOutcome(t, "repeat after top-up", h.funding.Withdraw(ctx, id, 7, usdt, 101), model.ExplicitFail, model.CodeInsufficientBalance)
	if b := h.fundingBalance(7, usdt); b != 1100 {
		t.Fatalf("balance %d", b)
	}
	wantOutcome(t, "refund without withdraw", h.funding.Refund(ctx, id, 7, usdt, 101), model.ExplicitFail, model.CodeRefundWithoutWithdraw)
	wantOutcome(t, "refund of unknown req_id", h.funding.Refund(ctx, newID(t, h), 7, usdt, 5), model.ExplicitFail, model.CodeRefundWithoutWithdraw)
	if b := h.fundingBalance(7, usdt); b != 1100 {
		t.Fatalf("balance %d after refused refunds", b)
	}
}

func TestFundingAdapterRevalidates(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(7, usdt, 100)
	wantOutcome(t, "amount 0", h.funding.Withdraw(ctx, newID(t, h), 7, usdt, 0), model.ExplicitFail, model.CodeInvalidAmount)
	wantOutcome(t, "amount < 0", h.funding.Deposit(ctx, newID(t, h), 7, usdt, -5), model.ExplicitFail, model.CodeInvalidAmount)
	wantOutcome(t, "user 0", h.funding.Withdraw(ctx, newID(t, h), 0, usdt, 1), model.ExplicitFail, model.CodeForbidden)
	wantOutcome(t, "asset 0", h.funding.Withdraw(ctx, newID(t, h), 7, 0, 1), model.ExplicitFail, model.CodeInvalidAsset)
	wantOutcome(t, "bad req_id", h.funding.Withdraw(ctx, "not-a-ulid", 7, usdt, 1), model.Unknown, "")
	wantOutcome(t, "no account", h.funding.Withdraw(ctx, newID(t, h), 8, usdt, 1), model.ExplicitFail, model.CodeSourceAccountNotFound)
	wantOutcome(t, "deposit, no account", h.funding.Deposit(ctx, newID(t, h), 8, usdt, 1), model.ExplicitFail, model.CodeTargetAccountNotFound)
	wantOutcome(t, "deposit, new asset row", h.funding.Deposit(ctx, newID(t, h), 7, btc, 5), model.Success, "")
	if b := h.fundingBalance(7, btc); b != 5 {
		t.Fatalf("btc %d", b)
	}
	if err := h.funding.SetStatus(ctx, 7, usdt, model.Frozen); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "BAL-004 frozen", h.funding.Withdraw(ctx, newID(t, h), 7, usdt, 1), model.ExplicitFail, model.CodeAccountFrozen)
	wantOutcome(t, "deposit to frozen", h.funding.Deposit(ctx, newID(t, h), 7, usdt, 1), model.Success, "")
	if err := h.funding.SetStatus(ctx, 7, usdt, model.Disabled); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "BAL-005 disabled", h.funding.Withdraw(ctx, newID(t, h), 7, usdt, 1), model.ExplicitFail, model.CodeAccountDisabled)
	wantOutcome(t, "deposit to disabled", h.funding.Deposit(ctx, newID(t, h), 7, usdt, 1), model.ExplicitFail, model.CodeAccountDisabled)
	if b := h.fundingBalance(7, usdt); b != 101 {
		t.Fatalf("usdt %d", b)
	}
}

// TestFND001_ConcurrentSameReqID: 20 concurrent first calls of one withdraw
// deduct once, and all answer SUCCESS (or UNKNOWN for a step LOST to another
// holding the transfer in its batch, which a retry turns into SUCCESS).
func TestFND001_ConcurrentSameReqID(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(7, usdt, 1000)
	id := newID(t, h)
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := h.funding.Withdraw(ctx, id, 7, usdt, 400)
			for n := 0; o.Kind == model.Unknown && n < 100; n++ {
				o = h.funding.Withdraw(ctx, id, 7, usdt, 400) // LOST to the step holding the transfer: again
			}
			if o.Kind != model.Success {
				bad.Add(1)
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d calls did not succeed", bad.Load())
	}
	if b := h.fundingBalance(7, usdt); b != 600 {
		t.Fatalf("balance %d, want 600 (one deduction)", b)
	}
}

// TestCON003_CON004_BAL003_ConcurrentWithdraws: distinct withdraws racing
// on one balance never overdraw it (SELECT ... FOR UPDATE).
func TestCON003_CON004_BAL003_ConcurrentWithdraws(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(7, usdt, 1000)
	var wg sync.WaitGroup
	var okN, failN atomic.Int32
	for i := 0; i < 10; i++ {
		id := newID(t, h)
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch o := h.funding.Withdraw(ctx, id, 7, usdt, 300); o.Kind {
			case model.Success:
				okN.Add(1)
			case model.ExplicitFail:
				if o.Code != string(model.CodeInsufficientBalance) {
					t.Errorf("refusal %s", o)
				}
				failN.Add(1)
			default:
				t.Errorf("outcome %s", o)
			}
		}()
	}
	wg.Wait()
	if okN.Load() != 3 || failN.Load() != 7 {
		t.Fatalf("%d succeeded, %d refused; want 3 and 7", okN.Load(), failN.Load())
	}
	if b := h.fundingBalance(7, usdt); b != 100 {
		t.Fatalf("balance %d, want 100", b)
	}
}

// TestFND006_AtomicOperation: when the transaction fails after the balance
// change (the record insert raises), nothing of it stays, the answer is
// UNKNOWN (retry, never compensate), and the retry applies it once.
func TestFND006_AtomicOperation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(7, usdt, 1000)
	if _, err := h.pool.Exec(ctx, `CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'injected'; END $$;
		CREATE TRIGGER boom BEFORE INSERT ON transfer_operations FOR EACH ROW EXECUTE FUNCTION boom();`); err != nil {
		t.Fatal(err)
	}
	id := newID(t, h)
	wantOutcome(t, "withdraw with failing record", h.funding.Withdraw(ctx, id, 7, usdt, 300), model.Unknown, "")
	if b := h.fundingBalance(7, usdt); b != 1000 {
		t.Fatalf("balance %d after a failed transaction, want 1000", b)
	}
	if _, err := h.pool.Exec(ctx, `DROP TRIGGER boom ON transfer_operations`); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "retry", h.funding.Withdraw(ctx, id, 7, usdt, 300), model.Success, "")
	wantOutcome(t, "retry again", h.funding.Withdraw(ctx, id, 7, usdt, 300), model.Success, "")
	if b := h.fundingBalance(7, usdt); b != 700 {
		t.Fatalf("balance %d, want 700", b)
	}
}

func TestExternalDepositIdempotent(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		credited, err := h.funding.ExternalDeposit(ctx, "chain-tx-1", 7, usdt, 500)
		if err != nil || credited != (i == 0) {
			t.Fatalf("deposit %d: credited=%v err=%v", i, credited, err)
		}
	}
	if _, err := h.funding.ExternalDeposit(ctx, "chain-tx-1", 7, usdt, 501); err == nil {
		t.Fatal("tx_ref reused with another amount accepted")
	}
	if b := h.fundingBalance(7, usdt); b != 500 {
		t.Fatalf("balance %d", b)
	}
	st, err := h.funding.AccountState(ctx, 7, btc)
	if err != nil || !st.Exists || st.Available != 0 || st.Status != model.Active {
		t.Fatalf("account without the asset row: %+v %v", st, err)
	}
	st, err = h.funding.AccountState(ctx, 8, usdt)
	if err != nil || st.Exists {
		t.Fatalf("no account: %+v %v", st, err)
	}
	ft, err := h.funding.Totals(ctx, usdt)
	if err != nil || ft.Balance != 500 || ft.Deposits != 500 || ft.InFlight != 0 {
		t.Fatalf("totals %+v %v", ft, err)
	}
}
