package transfer

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// FaultSource is where a Batcher draws the FUNDING faults it injects inside
// its transactions (transferfault.Faulty): Draw takes the fault armed for
// one call of op for reqID (model.FaultNone: none), Die acts on a drawn
// crash (the process dies; if it returns, the batch fails as if it had).
type FaultSource interface {
	Draw(op model.Op, reqID string) model.Fault
	Die()
}

// SetFaults injects f's FUNDING faults inside b's transactions, below every
// path that reaches FUNDING (a fused step's transaction included); call it
// before Start. f is a fault source there, not an adapter (transferfault.New(nil)):
// f.Inject(op, fault, n) arms the next n FUNDING calls of op. In a batch:
//
//	FaultExplicitFail         a first call is refused, EXPLICIT_FAIL(INJECTED),
//	                          recorded like any refusal (a recorded outcome wins)
//	FaultTimeoutBeforeEffect, FaultNetworkError, FaultPending, FaultUnknown
//	                          the call answers that, decided nothing, had no effect
//	FaultCrashBefore          the process dies before COMMIT (f.Crash); without
//	                          Crash the transaction fails before COMMIT: every
//	                          caller of the batch gets an error, nothing committed
//	FaultTimeoutAfterEffect   COMMIT succeeds and its answer is lost: the caller
//	                          gets an error (unknown outcome)
//	FaultCrashAfter           the process dies after COMMIT (f.Crash); without
//	                          Crash, as FaultTimeoutAfterEffect
//
// Recorded outcomes are in the database, so f needs no Performed hook.
func (b *Batcher) SetFaults(f FaultSource) { b.faults = f }

// beforeEffect is the answer of a fault that stops a call before its
// effect, if f is one.
func beforeEffect(f model.Fault) (model.Outcome, bool) {
	switch f {
	case model.FaultTimeoutBeforeEffect:
		return model.Outcome{Kind: model.Timeout, Code: "injected before effect"}, true
	case model.FaultNetworkError:
		return model.Outcome{Kind: model.NetworkError, Code: "injected"}, true
	case model.FaultPending:
		return model.Outcome{Kind: model.Pending, Code: "injected"}, true
	case model.FaultUnknown:
		return model.UnknownOutcome("injected"), true
	}
	return model.Outcome{}, false
}

// errInjected is the error of a batch an injected fault failed or whose
// answer it lost.
var errInjected = errors.New("transfer batch: injected fault")

// crashBefore acts on a FaultCrashBefore drawn in a batch, before its COMMIT.
func crashBefore(f FaultSource, drawn []model.Fault) error {
	if slices.Contains(drawn, model.FaultCrashBefore) {
		f.Die()
		return fmt.Errorf("%w: crash before COMMIT", errInjected)
	}
	return nil
}

// afterCommit acts on the faults drawn in a batch that committed.
func afterCommit(f FaultSource, drawn []model.Fault, ans []batchAnswer) {
	for i, d := range drawn {
		switch d {
		case model.FaultCrashAfter:
			f.Die()
			fallthrough
		case model.FaultTimeoutAfterEffect:
			ans[i] = batchAnswer{err: fmt.Errorf("%w: the answer of COMMIT lost", errInjected)}
		}
	}
}
