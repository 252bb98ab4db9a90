package chaintx

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Action is a stuck-resolution action (spec §3.7).
type Action string

const (
	ActionNoop        Action = "NOOP"        // nothing on chain: resubmission, metrics and alerts go on
	ActionCancel      Action = "CANCEL"      // a zero-value transfer to self in the tx's nonce, higher fees
	ActionReplace     Action = "REPLACE"     // the tx's own payload in its nonce, higher fees
	ActionPlaceholder Action = "PLACEHOLDER" // zero-value transfers to self in the unheld nonces below the tx
	// ActionResolveForeign is the operator's only (never a hook's): the
	// tx's nonce is final on chain with a tx none of ours, so the tx is
	// FAILED_FINAL (sub_state FOREIGN_NONCE) after a proof (foreign.go).
	ActionResolveForeign Action = "RESOLVE_FOREIGN"
)

// ParseAction parses a hook action name (case-insensitive): what
// --chain-stuck-action and a Hook may say.
func ParseAction(s string) (Action, error) {
	switch a := Action(strings.ToUpper(s)); a {
	case ActionNoop, ActionCancel, ActionReplace, ActionPlaceholder:
		return a, nil
	}
	return "", fmt.Errorf("%w %q (want NOOP, CANCEL, REPLACE or PLACEHOLDER)", ErrBadAction, s)
}

// ParseOperatorAction parses an action an operator may ask for
// (POST /admin/v1/tx/{id}/remediate): the hook's, and RESOLVE_FOREIGN.
func ParseOperatorAction(s string) (Action, error) {
	if a := Action(strings.ToUpper(s)); a == ActionResolveForeign {
		return a, nil
	}
	if a, err := ParseAction(s); err == nil {
		return a, nil
	}
	return "", fmt.Errorf("%w %q (want NOOP, CANCEL, REPLACE, PLACEHOLDER or RESOLVE_FOREIGN)", ErrBadAction, s)
}

// ResolutionContext is what a hook sees of a stuck tx (spec §3.7).
type ResolutionContext struct {
	Submitter         Address
	TxID              TxID
	RequestID         string
	Nonce             uint64
	TxHash            Hash
	State             State
	SubmitAttempts    int
	LastError         string
	Age               time.Duration // since allocation
	PendingQueueDepth int           // the submitter's pending txs
}

// Decision is a hook's answer; Reason goes to the audit.
type Decision struct {
	Action Action
	Reason string
}

// Hook decides what to do with a tx that went STUCK. It is called on the
// leader only, once per STUCK transition; whatever it returns is executed
// fenced and audited (tx_remediations), and must be safe to repeat (the
// executions are: see Manager.Remediate).
type Hook interface {
	Decide(ctx context.Context, rc ResolutionContext) Decision
}

// StaticHook always returns the same action: the built-in policies
// (--chain-stuck-action). The default is NOOP (spec: the system does not
// rewrite a business transaction unless the business allows it).
type StaticHook Action

// Decide implements Hook.
func (h StaticHook) Decide(_ context.Context, rc ResolutionContext) Decision {
	a := Action(h)
	if a == "" {
		a = ActionNoop
	}
	return Decision{Action: a, Reason: fmt.Sprintf("policy %s: no receipt %s after allocation", a, rc.Age.Round(time.Second))}
}
