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
	r, err := b.run(c, false)
	if err != nil {
		return nil, err
	}
	evs := append(dst[:0], r.Events...)
	b.replies.Put(r)
	return evs, nil
}

// SubmitResult is Submit with only the EvResult copied out of the pipeline.
func (b *pipelineBackend) SubmitResult(c *core.Command) (core.Event, error) {
	r, err := b.run(c, true)
	if err != nil {
		return core.Event{}, err
	}
	res := r.Result()
	b.replies.Put(r)
	return res, nil
}

// run submits c with a pooled Reply and waits for it; the caller copies
// what it needs and puts the Reply back.
func (b *pipelineBackend) run(c *core.Command, resultOnly bool) (*journal.Reply, error) {
	r := b.replies.Get().(*journal.Reply)
	r.ResultOnly = resultOnly
	if _, err := b.pl.TrySubmit(c, r); err != nil {
		b.replies.Put(r)
		switch {
		case errors.Is(err, journal.ErrBusy):
			return nil, gateway.ErrBusy
		case errors.Is(err, journal.ErrInvalidKind):
			return nil, err
		default:
			return nil, gateway.ErrUnavailable
		}
	}
	if err := b.pl.Wait(r); err != nil {
		return nil, gateway.ErrUnavailable // r may still be signalled: never reuse it
	}
	return r, nil
}

// Read runs fn on the read view once it is durable.
func (b *pipelineBackend) Read(fn func(p *core.Processor, h *gateway.History) error) error {
	err := b.pl.Read(func(p *core.Processor) error { return fn(p, b.hist) })
	if errors.Is(err, journal.ErrStopped) { // includes a failed journal
		return gateway.ErrUnavailable
	}
	return err
}
