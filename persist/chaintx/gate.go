package chaintx

import (
	"context"
	"slices"
	"sync"
)

// allocGate merges the writer workers' batches into shared transactions
// with late binding: a worker with work takes a ticket and waits; a free
// committer claims every ticket waiting, and only then does each worker
// drain its queue and build its groups, so a batch holds everything that
// arrived while the committers were busy (the busier, the bigger; one
// commit and a fixed number of round trips for all of it). A worker holds
// one ticket at a time and a submitter belongs to one worker, so a
// submitter's groups never share a transaction and keep their order.
type allocGate struct {
	run func(gs []AllocGroup) ([]AllocResult, error) // one transaction

	mu      sync.Mutex
	waiting []*ticket     // taken, not yet claimed (mu)
	notify  chan struct{} // buffered(1): a ticket was taken
	quit    chan struct{} // closed by stop
	wg      sync.WaitGroup
	once    sync.Once
}

// ticket is one worker's place in a shared transaction.
type ticket struct {
	claimed chan struct{} // closed by the committer: build the groups now
	gs      []AllocGroup  // set by the worker before sub
	sub     chan struct{} // closed by the worker: gs is ready
	res     []AllocResult
	err     error
	done    chan struct{} // closed by the committer: res / err are set
}

func newAllocGate(committers int, run func([]AllocGroup) ([]AllocResult, error)) *allocGate {
	g := &allocGate{run: run, notify: make(chan struct{}, 1), quit: make(chan struct{})}
	for range committers {
		g.wg.Add(1)
		go g.loop()
	}
	return g
}

// wait takes a ticket and returns once a committer claims it; the caller
// must then call run exactly once (with no groups if it has none). An
// error (ctx ended, gate stopped) means nothing was claimed.
func (g *allocGate) wait(ctx context.Context) (*ticket, error) {
	t := &ticket{claimed: make(chan struct{}), sub: make(chan struct{}), done: make(chan struct{})}
	g.mu.Lock()
	select {
	case <-g.quit:
		g.mu.Unlock()
		return nil, errCombinerStopped
	default:
	}
	g.waiting = append(g.waiting, t)
	g.mu.Unlock()
	select {
	case g.notify <- struct{}{}:
	default:
	}
	var err error
	select {
	case <-t.claimed:
		return t, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-g.quit:
		err = errCombinerStopped
	}
	g.mu.Lock()
	if i := slices.Index(g.waiting, t); i >= 0 {
		g.waiting = slices.Delete(g.waiting, i, i+1)
		g.mu.Unlock()
		return nil, err
	}
	g.mu.Unlock()
	<-t.claimed // claimed meanwhile: the committer waits for this worker's groups
	return t, nil
}

// run hands the worker's groups to the claiming committer and waits for
// the shared transaction.
func (t *ticket) run(gs []AllocGroup) ([]AllocResult, error) {
	t.gs = gs
	close(t.sub)
	<-t.done
	return t.res, t.err
}

func (g *allocGate) loop() {
	defer g.wg.Done()
	for {
		g.mu.Lock()
		ts := g.waiting
		g.waiting = nil
		g.mu.Unlock()
		if len(ts) == 0 {
			select {
			case <-g.notify:
				continue
			case <-g.quit:
				return
			}
		}
		for _, t := range ts {
			close(t.claimed)
		}
		var all []AllocGroup
		for _, t := range ts {
			<-t.sub
			all = append(all, t.gs...)
		}
		var res []AllocResult
		var err error
		if len(all) > 0 {
			res, err = g.run(all)
		}
		for _, t := range ts {
			if err == nil {
				t.res, res = res[:len(t.gs):len(t.gs)], res[len(t.gs):]
			}
			t.err = err
			close(t.done)
		}
	}
}

// stop ends the committers after the transaction each is running; a
// ticket taken after, or still waiting, gets errCombinerStopped.
func (g *allocGate) stop() {
	g.once.Do(func() {
		g.mu.Lock()
		close(g.quit)
		g.mu.Unlock()
		g.wg.Wait()
	})
}
