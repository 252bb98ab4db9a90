package gateway

import (
	"errors"

	"github.com/ubscore/ubscore/core"
)

// Backend is what the HTTP layer needs from the sequenced core. The server
// implements it over journal.Pipeline (cmd/exchange); tests may implement it
// over a plain core.Processor.
type Backend interface {
	// Submit sequences c (the pipeline stamps Seq and Time) and returns the
	// command's events once it is durable, appended to dst[:0] (the caller
	// reuses dst across requests); the last event is the EvResult. The
	// returned slice belongs to the caller. It returns ErrBusy when the
	// input ring is full (answer 503 SYSTEM_BUSY, never queue without bound)
	// and ErrUnavailable once the core has stopped.
	Submit(c *core.Command, dst []core.Event) ([]core.Event, error)

	// SubmitResult is Submit for a caller that needs only the command's
	// EvResult (the p2p ticker: a tick has thousands of events, which the
	// view and the followers take from the pipeline, not from the answer).
	SubmitResult(c *core.Command) (core.Event, error)

	// Read runs fn on a read view of the core state. The view includes
	// every command whose Submit has returned to anyone, never includes an
	// effect that could still be lost in a crash (Read returns only once the
	// seq the view reflects is durable), and is stable while fn runs. fn
	// must only call the query methods of *core.Processor (Balances,
	// BalanceOf, AccountStatusOf, Depth, Market, Markets, Order, OpenOrders,
	// LastSeq, Halted) and read the History, and must not keep references into them
	// after it returns. Read never blocks the processor.
	Read(fn func(p *core.Processor, h *History) error) error
}

var (
	// ErrBusy: the input ring is full.
	ErrBusy = errors.New("gateway: core busy")
	// ErrUnavailable: the core has stopped (shutdown or failure).
	ErrUnavailable = errors.New("gateway: core unavailable")
)
