package transfer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Fault is an injectable adapter misbehaviour.
type Fault uint8

const (
	FaultNone                Fault = iota
	FaultExplicitFail              // refuse with EXPLICIT_FAIL(INJECTED); sticky for that req_id and op
	FaultTimeoutAfterEffect        // perform the operation, then report TIMEOUT
	FaultTimeoutBeforeEffect       // report TIMEOUT without performing it
	FaultNetworkError              // report NETWORK_ERROR without performing it
	FaultPending                   // report PENDING without performing it
	FaultUnknown                   // report UNKNOWN without performing it
	FaultCrashBefore               // call Faulty.Crash before the operation (the process dies: a crash test)
	FaultCrashAfter                // perform the operation, then call Faulty.Crash
)

// CodeInjected is the code of an injected explicit failure.
const CodeInjected Code = "INJECTED"

// Faulty wraps an Adapter with injectable faults per operation: each
// Inject(op, f, n) arms f for the next n calls of op (n < 0: until Clear).
// An injected explicit failure is remembered per (op, req_id) and returned
// on every later call, keeping the adapter contract (a refused operation
// never succeeds later) even under concurrent drivers; it is not injected at
// all once the inner adapter has seen that (op, req_id).
type Faulty struct {
	// Crash kills the process for FaultCrashBefore/After (the server sends
	// itself SIGKILL). It must not return; if it is nil or does return, the
	// call reports UNKNOWN, which is what a caller of a dead process sees.
	Crash func()
	// Performed, when set, reports whether the inner adapter has durably
	// performed (op, req_id), for example before a restart emptied this
	// process's memory of it: an explicit failure is never injected for
	// such an operation (that would refuse, and so compensate, an effect
	// that happened). An error counts as performed.
	Performed func(ctx context.Context, op Op, reqID string) (bool, error)
	inner     Adapter
	mu        sync.Mutex
	armed     map[Op][]armedFault
	failed    map[spotOpKey]bool // injected explicit failures, returned forever
	touched   map[spotOpKey]bool // the inner adapter was called for (op, req_id)
	calls     map[Op]int
}

type armedFault struct {
	f Fault
	n int // remaining calls; < 0 = forever
}

// NewFaulty wraps inner with no faults armed.
func NewFaulty(inner Adapter) *Faulty {
	return &Faulty{inner: inner, armed: map[Op][]armedFault{}, failed: map[spotOpKey]bool{},
		touched: map[spotOpKey]bool{}, calls: map[Op]int{}}
}

// Inject arms fault f for the next n calls of op (n < 0: until Clear).
// Several injections queue in order.
func (a *Faulty) Inject(op Op, f Fault, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed[op] = append(a.armed[op], armedFault{f, n})
}

// Clear disarms every pending fault (remembered explicit failures stay).
func (a *Faulty) Clear() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed = map[Op][]armedFault{}
}

// Calls returns how many times op was called.
func (a *Faulty) Calls(op Op) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[op]
}

func (a *Faulty) next(op Op, reqID string) Fault {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls[op]++
	if a.failed[spotOpKey{op, reqID}] {
		return FaultExplicitFail
	}
	q := a.armed[op]
	if len(q) == 0 {
		a.touched[spotOpKey{op, reqID}] = true
		return FaultNone
	}
	f := q[0].f
	if q[0].n > 0 {
		q[0].n--
		if q[0].n == 0 {
			q = q[1:]
		}
	}
	a.armed[op] = q
	k := spotOpKey{op, reqID}
	switch {
	case f == FaultExplicitFail && a.touched[k]:
		// The inner adapter may already have performed it: refusing now
		// would break the contract (and compensate an effect). Pass through.
		f = FaultNone
	case f == FaultExplicitFail:
		a.failed[k] = true
	}
	if f == FaultNone || f == FaultTimeoutAfterEffect || f == FaultCrashAfter {
		a.touched[k] = true
	}
	return f
}

func (a *Faulty) do(ctx context.Context, op Op, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	t := Transfer{ReqID: reqID, UserID: user, Asset: asset, Amount: amount}
	if a.Performed != nil {
		if done, err := a.Performed(ctx, op, reqID); done || err != nil {
			a.mu.Lock()
			a.touched[spotOpKey{op, reqID}] = true
			a.mu.Unlock()
		}
	}
	switch a.next(op, reqID) {
	case FaultExplicitFail:
		return fail(CodeInjected)
	case FaultTimeoutAfterEffect:
		call(ctx, a.inner, op, t)
		return Outcome{Kind: Timeout, Code: "injected after effect"}
	case FaultTimeoutBeforeEffect:
		return Outcome{Kind: Timeout, Code: "injected before effect"}
	case FaultNetworkError:
		return Outcome{Kind: NetworkError, Code: "injected"}
	case FaultPending:
		return Outcome{Kind: Pending, Code: "injected"}
	case FaultUnknown:
		return unknown("injected")
	case FaultCrashBefore:
		a.crash()
		return unknown("injected crash before")
	case FaultCrashAfter:
		call(ctx, a.inner, op, t)
		a.crash()
		return unknown("injected crash after")
	}
	return call(ctx, a.inner, op, t)
}

func (a *Faulty) crash() {
	if a.Crash != nil {
		a.Crash()
	}
}

func (a *Faulty) Withdraw(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return a.do(ctx, OpWithdraw, reqID, user, asset, amount)
}

func (a *Faulty) Deposit(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return a.do(ctx, OpDeposit, reqID, user, asset, amount)
}

func (a *Faulty) Refund(ctx context.Context, reqID string, user UserID, asset AssetID, amount Units) Outcome {
	return a.do(ctx, OpRefund, reqID, user, asset, amount)
}

// AccountState forwards to the inner adapter when it reads accounts.
func (a *Faulty) AccountState(ctx context.Context, user UserID, asset AssetID) (AccountState, error) {
	if r, ok := a.inner.(AccountReader); ok {
		return r.AccountState(ctx, user, asset)
	}
	return AccountState{Status: Active}, nil
}

// SetFaults injects f's FUNDING faults inside b's transactions, below every
// path that reaches FUNDING (a fused step's transaction included); call it
// before Start. f is a fault source there, not an adapter (NewFaulty(nil)):
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
func (b *Batcher) SetFaults(f *Faulty) { b.faults = f }

// beforeEffect is the answer of a fault that stops a call before its
// effect, if f is one.
func beforeEffect(f Fault) (Outcome, bool) {
	switch f {
	case FaultTimeoutBeforeEffect:
		return Outcome{Kind: Timeout, Code: "injected before effect"}, true
	case FaultNetworkError:
		return Outcome{Kind: NetworkError, Code: "injected"}, true
	case FaultPending:
		return Outcome{Kind: Pending, Code: "injected"}, true
	case FaultUnknown:
		return unknown("injected"), true
	}
	return Outcome{}, false
}

// errInjected is the error of a batch an injected fault failed or whose
// answer it lost.
var errInjected = errors.New("transfer batch: injected fault")

// crashBefore acts on a FaultCrashBefore drawn in a batch, before its COMMIT.
func crashBefore(f *Faulty, drawn []Fault) error {
	if slices.Contains(drawn, FaultCrashBefore) {
		f.crash()
		return fmt.Errorf("%w: crash before COMMIT", errInjected)
	}
	return nil
}

// afterCommit acts on the faults drawn in a batch that committed.
func afterCommit(f *Faulty, drawn []Fault, ans []batchAnswer) {
	for i, d := range drawn {
		switch d {
		case FaultCrashAfter:
			f.crash()
			fallthrough
		case FaultTimeoutAfterEffect:
			ans[i] = batchAnswer{err: fmt.Errorf("%w: the answer of COMMIT lost", errInjected)}
		}
	}
}
