package chaintx

import (
	"context"
	"errors"
	"sync"
	"time"
)

// combiner merges calls into fewer database round trips and commits: a
// call waits while up to n runs are going, then goes out together with
// every call queued meanwhile, as ONE run (one query or transaction over
// all their groups). The manager uses it for the entry pre-checks of
// request_ids (reads: order does not matter) and for the workers' broadcast
// records (Store.Submitted fences each submitter's group on its own; each
// worker's sender has one call in flight and a submitter belongs to one
// worker, so a submitter's records keep their order). Nonce allocation uses
// allocGate instead (late binding).
type combiner[G, R any] struct {
	q    chan *combineCall[G, R]
	run  func(gs []G) ([]R, error) // one transaction for all the groups; one result per group
	size func(G) int               // a group's rows
	max  int                       // rows per transaction, at most (a single call may exceed it)
	wg   sync.WaitGroup
	once sync.Once
	quit chan struct{} // closed by stop: the runners end
	gone chan struct{} // closed once they have: calls left in q are not run
}

// errCombinerStopped answers a call made after (or left queued at) stop.
var errCombinerStopped = errors.New("chaintx: stopped")

type combineCall[G, R any] struct {
	gs   []G
	rows int
	res  []R
	err  error
	done chan struct{}
}

// newCombiner starts n runners; stop ends them once no call is pending.
func newCombiner[G, R any](n, max int, size func(G) int, run func(gs []G) ([]R, error)) *combiner[G, R] {
	c := &combiner[G, R]{q: make(chan *combineCall[G, R], 1024), run: run, size: size, max: max,
		quit: make(chan struct{}), gone: make(chan struct{})}
	for range n {
		c.wg.Add(1)
		go c.loop()
	}
	return c
}

// do runs gs in a transaction, maybe together with other calls' groups,
// and returns their results (or the transaction's error). It waits for the
// transaction, unless ctx ends first (the transaction still runs).
func (c *combiner[G, R]) do(ctx context.Context, gs []G) ([]R, error) {
	call := &combineCall[G, R]{gs: gs, done: make(chan struct{})}
	for _, g := range gs {
		call.rows += c.size(g)
	}
	select {
	case c.q <- call:
	case <-c.quit:
		return nil, errCombinerStopped
	}
	select {
	case <-call.done:
		return call.res, call.err
	case <-c.gone:
		select {
		case <-call.done:
			return call.res, call.err
		default:
			return nil, errCombinerStopped
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *combiner[G, R]) loop() {
	defer c.wg.Done()
	var carry *combineCall[G, R] // a call that did not fit the previous transaction
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-c.q:
			case <-c.quit:
				return
			}
		}
		calls := []*combineCall[G, R]{first}
		n := first.rows
	drain:
		for n < c.max {
			select {
			case call := <-c.q:
				if n+call.rows > c.max {
					carry = call
					break drain
				}
				calls, n = append(calls, call), n+call.rows
			default:
				break drain
			}
		}
		var all []G
		for _, call := range calls {
			all = append(all, call.gs...)
		}
		res, err := c.run(all)
		for _, call := range calls {
			if err == nil {
				call.res, res = res[:len(call.gs):len(call.gs)], res[len(call.gs):]
			}
			call.err = err
			close(call.done)
		}
	}
}

// stop ends the runners (after the transaction each is running); calls
// made after, or still queued, answer errCombinerStopped.
func (c *combiner[G, R]) stop() {
	c.once.Do(func() {
		close(c.quit)
		c.wg.Wait()
		close(c.gone)
	})
}

// combineBatches workers' full batches (MaxBatch rows each) fit one combined
// pre-check or broadcast record.
const combineBatches = 4

// recordTimeout bounds the write that records broadcasts.
const recordTimeout = 10 * time.Second

// The manager's combiners: the entry pre-checks of request_ids, nonce
// allocation (a gate: late binding) and broadcast records.
func (m *Manager) newCombiners() {
	rows := combineBatches * m.cfg.MaxBatch
	m.allocs = newAllocGate(m.cfg.Committers, func(gs []AllocGroup) ([]AllocResult, error) {
		return m.cfg.Store.Allocate(m.ctx, gs)
	})
	m.prechecks = newCombiner(m.cfg.Committers, rows, func(RequestRef) int { return 1 }, func(rs []RequestRef) ([]*Tx, error) {
		txs, err := m.cfg.Store.GetByRequests(m.ctx, rs)
		if err != nil {
			return nil, err
		}
		byRef := make(map[RequestRef]*Tx, len(txs))
		for i := range txs {
			byRef[RequestRef{txs[i].Submitter, txs[i].RequestID}] = &txs[i]
		}
		out := make([]*Tx, len(rs))
		for i, r := range rs {
			out[i] = byRef[r]
		}
		return out, nil
	})
	m.records = newCombiner(m.cfg.Committers, rows, func(g SubmitGroup) int { return len(g.Results) }, func(gs []SubmitGroup) ([]error, error) {
		// The write outlives a cancelled ctx: what was sent must be recorded.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), recordTimeout)
		defer cancel()
		return m.cfg.Store.Submitted(ctx, gs, m.cfg.ResubmitInterval)
	})
}
