// Package transferfault injects faults into a transfer's sides (spec 000
// fault injection): Faulty wraps a model.Adapter (the SPOT side) and is the
// FaultSource a persist/transfer Batcher draws its FUNDING faults from,
// inside its transactions. The server arms it through /admin/v1/faults
// when fault injection is on; the tests arm it directly.
package transferfault

import (
	"context"
	"sync"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

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
	Performed func(ctx context.Context, op model.Op, reqID string) (bool, error)
	inner     model.Adapter
	mu        sync.Mutex
	armed     map[model.Op][]armedFault
	failed    map[opKey]bool // injected explicit failures, returned forever
	touched   map[opKey]bool // the inner adapter was called for (op, req_id)
	calls     map[model.Op]int
}

type armedFault struct {
	f model.Fault
	n int // remaining calls; < 0 = forever
}

// New wraps inner with no faults armed.
func New(inner model.Adapter) *Faulty {
	return &Faulty{inner: inner, armed: map[model.Op][]armedFault{}, failed: map[opKey]bool{},
		touched: map[opKey]bool{}, calls: map[model.Op]int{}}
}

// Inject arms fault f for the next n calls of op (n < 0: until Clear).
// Several injections queue in order.
func (a *Faulty) Inject(op model.Op, f model.Fault, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed[op] = append(a.armed[op], armedFault{f, n})
}

// Clear disarms every pending fault (remembered explicit failures stay).
func (a *Faulty) Clear() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed = map[model.Op][]armedFault{}
}

// Calls returns how many times op was called.
func (a *Faulty) Calls(op model.Op) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[op]
}

// Draw takes the fault armed for one call of op for reqID (the FaultSource
// of a Batcher, and of this wrapper's own calls).
func (a *Faulty) Draw(op model.Op, reqID string) model.Fault {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls[op]++
	if a.failed[opKey{op, reqID}] {
		return model.FaultExplicitFail
	}
	q := a.armed[op]
	if len(q) == 0 {
		a.touched[opKey{op, reqID}] = true
		return model.FaultNone
	}
	f := q[0].f
	if q[0].n > 0 {
		q[0].n--
		if q[0].n == 0 {
			q = q[1:]
		}
	}
	a.armed[op] = q
	k := opKey{op, reqID}
	switch {
	case f == model.FaultExplicitFail && a.touched[k]:
		// The inner adapter may already have performed it: refusing now
		// would break the contract (and compensate an effect). Pass through.
		f = model.FaultNone
	case f == model.FaultExplicitFail:
		a.failed[k] = true
	}
	if f == model.FaultNone || f == model.FaultTimeoutAfterEffect || f == model.FaultCrashAfter {
		a.touched[k] = true
	}
	return f
}

func (a *Faulty) do(ctx context.Context, op model.Op, reqID string, user model.UserID, asset model.AssetID, amount model.Units) model.Outcome {
	if a.Performed != nil {
		if done, err := a.Performed(ctx, op, reqID); done || err != nil {
			a.mu.Lock()
			a.touched[opKey{op, reqID}] = true
			a.mu.Unlock()
		}
	}
	switch a.Draw(op, reqID) {
	case model.FaultExplicitFail:
		return model.Fail(model.CodeInjected)
	case model.FaultTimeoutAfterEffect:
		model.Call(ctx, a.inner, op, reqID, user, asset, amount)
		return model.Outcome{Kind: model.Timeout, Code: "injected after effect"}
	case model.FaultTimeoutBeforeEffect:
		return model.Outcome{Kind: model.Timeout, Code: "injected before effect"}
	case model.FaultNetworkError:
		return model.Outcome{Kind: model.NetworkError, Code: "injected"}
	case model.FaultPending:
		return model.Outcome{Kind: model.Pending, Code: "injected"}
	case model.FaultUnknown:
		return model.UnknownOutcome("injected")
	case model.FaultCrashBefore:
		a.Die()
		return model.UnknownOutcome("injected crash before")
	case model.FaultCrashAfter:
		model.Call(ctx, a.inner, op, reqID, user, asset, amount)
		a.Die()
		return model.UnknownOutcome("injected crash after")
	}
	return model.Call(ctx, a.inner, op, reqID, user, asset, amount)
}

// Die calls Crash, if set.
func (a *Faulty) Die() {
	if a.Crash != nil {
		a.Crash()
	}
}

func (a *Faulty) Withdraw(ctx context.Context, reqID string, user model.UserID, asset model.AssetID, amount model.Units) model.Outcome {
	return a.do(ctx, model.OpWithdraw, reqID, user, asset, amount)
}

func (a *Faulty) Deposit(ctx context.Context, reqID string, user model.UserID, asset model.AssetID, amount model.Units) model.Outcome {
	return a.do(ctx, model.OpDeposit, reqID, user, asset, amount)
}

func (a *Faulty) Refund(ctx context.Context, reqID string, user model.UserID, asset model.AssetID, amount model.Units) model.Outcome {
	return a.do(ctx, model.OpRefund, reqID, user, asset, amount)
}

// AccountState forwards to the inner adapter when it reads accounts.
func (a *Faulty) AccountState(ctx context.Context, user model.UserID, asset model.AssetID) (model.AccountState, error) {
	if r, ok := a.inner.(model.AccountReader); ok {
		return r.AccountState(ctx, user, asset)
	}
	return model.AccountState{Status: model.Active}, nil
}

type opKey struct {
	op    model.Op
	reqID string
}
