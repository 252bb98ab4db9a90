package main

import (
	"errors"
	"sync"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
)

// pipelineBackend is gateway.Backend over the journal pipeline: commands go
// through the ring (sequenced, journaled, fsynced before the answer), reads
// go to the pipeline's read view with the gateway's History beside it.
type pipelineBackend struct {
	pl      *journal.Pipeline
	hist    *gateway.History // updated by the view goroutine (OnView), read under Read
	replies sync.Pool        // *journal.Reply
}

func newPipelineBackend(pl *journal.Pipeline, hist *gateway.History) *pipelineBackend {
	b := &pipelineBackend{pl: pl, hist: hist}
	b.replies.New = func() any { return journal.NewReply() }
	return b
}

// Submit sequences c without waiting for room: a full ring is ErrBusy (503),
// never an unbounded queue.
func (b *pipelineBackend) Submit(c *core.Command, dst []core.Event) ([]core.Event, error) {
	r := b.replies.Get().(*journal.Reply)
	r.ResultOnly = false // every path of SubmitResult clears it; this keeps Submit independent of that
	if _, err := b.pl.TrySubmit(c, r); err != nil {
		b.replies.Put(r)
		return nil, submitError(err)
	}
	if err := b.pl.Wait(r); err != nil {
		return nil, gateway.ErrUnavailable // r may still be signalled: never reuse it
	}
	evs := append(dst[:0], r.Events...)
	b.replies.Put(r)
	return evs, nil
}

// SubmitResult is Submit with only the EvResult copied out of the pipeline.
func (b *pipelineBackend) SubmitResult(c *core.Command) (core.Event, error) {
	r := b.replies.Get().(*journal.Reply)
	r.ResultOnly = true
	if _, err := b.pl.TrySubmit(c, r); err != nil {
		r.ResultOnly = false
		b.replies.Put(r)
		return core.Event{}, submitError(err)
	}
	if err := b.pl.Wait(r); err != nil {
		return core.Event{}, gateway.ErrUnavailable // r may still be signalled: never reuse it
	}
	res := r.Result()
	r.ResultOnly = false
	b.replies.Put(r)
	return res, nil
}

// submitError is the gateway's error for a refused TrySubmit.
func submitError(err error) error {
	switch {
	case errors.Is(err, journal.ErrBusy):
		return gateway.ErrBusy
	case errors.Is(err, journal.ErrInvalidKind):
		return err
	default:
		return gateway.ErrUnavailable
	}
}

// Read runs fn on the read view once it is durable.
func (b *pipelineBackend) Read(fn func(p *core.Processor, h *gateway.History) error) error {
	err := b.pl.Read(func(p *core.Processor) error { return fn(p, b.hist) })
	if errors.Is(err, journal.ErrStopped) { // includes a failed journal
		return gateway.ErrUnavailable
	}
	return err
}
