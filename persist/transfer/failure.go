package transfer

import (
	"strings"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// FailureCode returns the stable reason of a transfer that ended FAILED or
// ROLLED_BACK: the code of the explicit refusal that decided it
// (INSUFFICIENT_BALANCE, ACCOUNT_FROZEN, ...), which steps.go records in
// error_message as "<step>: EXPLICIT_FAIL(<code>)". It is "" for any other
// state, and TRANSFER_FAILED when the message no longer carries a code (a
// later retry note, e.g. of a refund, replaced it).
func FailureCode(t Transfer) string {
	if t.State != Failed && t.State != RolledBack {
		return ""
	}
	if strings.HasPrefix(t.ErrorMessage, msgNotRecorded) {
		return string(model.CodeSystemError)
	}
	const mark = "EXPLICIT_FAIL("
	i := strings.LastIndex(t.ErrorMessage, mark)
	if i < 0 {
		return string(CodeTransferFailed)
	}
	rest := t.ErrorMessage[i+len(mark):]
	j := strings.IndexByte(rest, ')')
	if j <= 0 {
		return string(CodeTransferFailed)
	}
	return rest[:j]
}

// CodeTransferFailed is FailureCode's answer when the refusal's code is no
// longer recorded.
const CodeTransferFailed model.Code = "TRANSFER_FAILED"
