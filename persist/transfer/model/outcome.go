package model

import "fmt"

// OutcomeKind classifies an adapter's answer (spec 2.3). Only Success and
// ExplicitFail say what happened; every other kind means "unknown" and the
// FSM stays where it is and retries forever.
type OutcomeKind uint8

const (
	Unknown      OutcomeKind = iota // any other situation: retry (zero value on purpose)
	Success                         // the operation took effect (now or on an earlier call)
	ExplicitFail                    // a business refusal; nothing changed, and nothing ever will for this req_id
	Timeout                         // no answer in time: may or may not have taken effect
	Pending                         // accepted, not finished: may or may not take effect
	NetworkError                    // transport failure: may or may not have taken effect
)

var outcomeNames = [...]string{"UNKNOWN", "SUCCESS", "EXPLICIT_FAIL", "TIMEOUT", "PENDING", "NETWORK_ERROR"}

func (k OutcomeKind) String() string {
	if int(k) < len(outcomeNames) {
		return outcomeNames[k]
	}
	return fmt.Sprintf("OUTCOME(%d)", uint8(k))
}

// Outcome is an adapter's answer to one operation.
type Outcome struct {
	Kind OutcomeKind
	Code string // ExplicitFail: the stable reason (INSUFFICIENT_BALANCE, ...); otherwise optional detail
}

func (o Outcome) String() string {
	if o.Code == "" {
		return o.Kind.String()
	}
	return o.Kind.String() + "(" + o.Code + ")"
}

// OK, Fail and UnknownOutcome build the answers of an adapter.
func OK() Outcome                          { return Outcome{Kind: Success} }
func Fail(code Code) Outcome               { return Outcome{Kind: ExplicitFail, Code: string(code)} }
func UnknownOutcome(detail string) Outcome { return Outcome{Kind: Unknown, Code: detail} }

// Op is an adapter operation; the string is transfer_operations.op.
type Op string

const (
	OpWithdraw Op = "withdraw" // debit the source
	OpDeposit  Op = "deposit"  // credit the target
	OpRefund   Op = "refund"   // credit the source back after an explicit target failure
)
