package transfer

import (
	"testing"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

func TestFailureCode(t *testing.T) {
	for _, c := range []struct {
		state State
		msg   string
		want  string
	}{
		{Failed, "source withdraw: " + model.Fail(model.CodeInsufficientBalance).String(), "INSUFFICIENT_BALANCE"},
		{RolledBack, "target deposit: " + model.Fail(model.CodeAccountDisabled).String(), "ACCOUNT_DISABLED"},
		{Failed, "", "TRANSFER_FAILED"},
		{Failed, "EXPLICIT_FAIL()", "TRANSFER_FAILED"},
		{Committed, "target deposit: " + model.Fail(model.CodeAccountDisabled).String(), ""},
		{TargetPending, "deposit: TIMEOUT", ""},
	} {
		if got := FailureCode(Transfer{State: c.state, ErrorMessage: c.msg}); got != c.want {
			t.Errorf("FailureCode(%v, %q) = %q, want %q", c.state, c.msg, got, c.want)
		}
	}
}
