package transfer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// A Batcher is the Postgres path of Store and Funding, the only one:
// callers queue Get, CAS transitions, retry notes and fused steps (a
// FUNDING operation with the transitions around it; an Insert is one),
// and a writer goroutine runs whatever is queued as ONE transaction of one
// or two round trips (batch_tx.go), then answers every caller. A single
// request is a batch of one. Postgres pays one commit (one WAL flush) per
// batch instead of one per step, and the steps of concurrent transfers
// share round trips.
//
// The rules this file and its companions keep:
//   - every caller gets exactly one answer, the one its request would have
//     had alone, executed at some point between its call and its answer
//     (the requests of one batch are concurrent, so any order of them is
//     a valid history; the batch picks one and keeps it: reads, inserts,
//     CAS transitions, notes, FUNDING operations, each in arrival order);
//   - a request's effect commits with its batch or not at all; when the
//     transaction does not commit, or its commit is not confirmed, every
//     caller of the batch gets an error (an UNKNOWN outcome), never a
//     SUCCESS — except that a batch a statement failed (it certainly
//     rolled back: statementFailed) runs its requests again one by one,
//     so that only the request that fails alone gets the error;
//   - no request can fail the others for a business reason: every
//     decision (CAS lost, a refusal) is data, never a SQL error.
//
// Several Batchers (processes) may run at once on one database: they share
// the idempotency records and the row locks.
type Batcher struct {
	pool *pgxpool.Pool
	opt  BatchOptions

	mu     sync.RWMutex // guards closed against the close of queue
	closed bool
	queue  chan *batchReq   // bounded by MaxQueue: a full queue refuses
	reads  chan *accountReq // AccountState calls for the reader (batch_read.go), bounded likewise
	start  sync.Once
	wg     sync.WaitGroup // the writers
	stats  BatchStats
	faults FaultSource // FUNDING faults injected inside the batches (SetFaults); nil: none
}

// BatchStats are a Batcher's counters.
type BatchStats struct {
	Batches  atomic.Int64 // transactions committed
	Requests atomic.Int64 // requests answered by committed transactions
	Retries  atomic.Int64 // transactions run again after rolling back with no effect
	Failed   atomic.Int64 // transactions that did not commit: every caller got an error, unless Isolated ran them again
	Isolated atomic.Int64 // failed batches whose requests were then run one by one (statementFailed)
	Reads    atomic.Int64 // reader statements that answered AccountState calls (batch_read.go)
}

// Stats returns the live counters.
func (b *Batcher) Stats() *BatchStats { return &b.stats }

// Defaults and limits of BatchOptions.
const (
	DefaultMaxBatch = 512    // requests per transaction
	MaxBatchLimit   = 8192   // keeps one transaction's arrays and locks bounded
	DefaultMaxQueue = 16_384 // waiting requests
	DefaultWriters  = 1
	MaxWriters      = 16
	// batchAttempts bounds how often a batch that rolled back without
	// effect (a record-insert race, a deadlock) is run again.
	batchAttempts = 3
)

// BatchOptions tunes a Batcher; zero fields take the defaults.
type BatchOptions struct {
	MaxBatch int // requests per transaction, 1..MaxBatchLimit
	MaxQueue int // requests waiting for a writer; one more is refused (ErrBatcherFull)
	// Writers is how many batch transactions may be in flight at once, each
	// on a connection of its own held while the Batcher runs. With more than
	// one, two batches holding CAS requests of the same transfers (racing
	// drivers) can wait on each other; Postgres breaks such a deadlock and
	// the losing batch runs again.
	Writers int
	Timeout time.Duration // bound on one batch transaction (DefaultCallTimeout)
}

// ErrBatcherFull: the queue holds MaxQueue requests; the request was not run.
var ErrBatcherFull = errors.New("transfer: batcher queue full")

// ErrBatcherClosed: the Batcher was closed; the request was not run.
var ErrBatcherClosed = errors.New("transfer: batcher closed")

// NewBatcher returns a Batcher writing through pool; Start runs it.
func NewBatcher(pool *pgxpool.Pool, opt BatchOptions) *Batcher {
	def := func(v *int, d, hi int) {
		if *v <= 0 {
			*v = d
		}
		*v = min(*v, hi)
	}
	def(&opt.MaxBatch, DefaultMaxBatch, MaxBatchLimit)
	def(&opt.MaxQueue, DefaultMaxQueue, 1<<20)
	def(&opt.Writers, DefaultWriters, MaxWriters)
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultCallTimeout
	}
	return &Batcher{pool: pool, opt: opt, queue: make(chan *batchReq, opt.MaxQueue), reads: make(chan *accountReq, opt.MaxQueue)}
}

// Start starts the writers and the reader (once). Requests queued before
// wait for it.
func (b *Batcher) Start() {
	b.start.Do(func() {
		for range b.opt.Writers {
			b.wg.Add(1)
			go b.write()
		}
		b.wg.Add(1)
		go b.read()
	})
}

// Close refuses new requests, lets the writers run and answer everything
// already queued, and waits for them. It must not be called before Start
// while requests are queued (nobody would answer them before their
// contexts end).
func (b *Batcher) Close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.queue)
		close(b.reads)
	}
	b.mu.Unlock()
	b.wg.Wait()
}

type reqKind uint8

const (
	kindGet   reqKind = iota // Store.Get
	kindCAS                  // Store.Transition
	kindNote                 // Store.NoteRetry
	kindFused                // a fused step: CAS transitions around one FUNDING operation (batch_fused.go)
)

// batchReq is one caller's request. Once queued it belongs to the writer;
// the caller only receives from done.
type batchReq struct {
	kind   reqKind
	ctx    context.Context // the caller's: not run if it is done before its batch starts
	reqID  string
	from   State // CAS: the expected state; note: the state the note applies in
	to     State // CAS only
	msg    string
	op     model.Op // fused: with user, asset and amount (decideOne checks them)
	user   UserID
	asset  AssetID
	amount Units
	plan   *fusePlan // fused only, with reqID, op, user, asset and amount
	// fault is the FUNDING fault injected into op (Batcher.SetFaults), drawn
	// once per request (drawn): a run of its batch that rolled back and runs
	// again injects the same fault, not the next one armed.
	fault model.Fault
	drawn bool
	done  chan batchAnswer // capacity 1: a writer never blocks on a caller that left
}

// batchAnswer is what the caller gets. err != nil and not ErrNotFound: the
// batch did not commit, or its commit was not confirmed; the rest means
// nothing.
type batchAnswer struct {
	won      bool          // CAS: this request moved the transfer; fused: the transfer was in plan.at and held (locked or inserted)
	out      model.Outcome // fused (won): SUCCESS, EXPLICIT_FAIL or UNKNOWN (never recorded)
	state    State         // fused (won): the state the transfer was left in
	cas      int           // fused (won): CAS transitions made
	transfer Transfer      // get; CAS (won): the row as moved; fused: as inserted, then as its last transition left it
	inserted bool          // fused with plan.insert: false = the user's cid was taken
	err      error         // get: ErrNotFound; any kind: the batch failed
}

// do queues r and waits for its answer or the end of r.ctx. A caller that
// stops waiting gets r.ctx's error: its request may still run (an unknown
// outcome, as any cancelled call to a database).
func (b *Batcher) do(r *batchReq) batchAnswer {
	r.done = make(chan batchAnswer, 1)
	if err := push(b, b.queue, r); err != nil {
		return batchAnswer{err: err}
	}
	select {
	case a := <-r.done:
		return a
	case <-r.ctx.Done():
		return batchAnswer{err: r.ctx.Err()}
	}
}

// push queues r on ch (the writers' or the reader's) unless the Batcher
// is closed or ch is full.
func push[T any](b *Batcher, ch chan<- T, r T) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrBatcherClosed
	}
	select {
	case ch <- r:
		return nil
	default:
		return ErrBatcherFull
	}
}

// drain hands run, until ch is closed, each batch it takes from ch: the
// first waiting request and everything queued behind it up to max
// (requests that arrive while a batch runs form the next one: no timer, no
// added latency when idle).
func drain[T any](ch <-chan T, max int, run func([]T)) {
	batch := make([]T, 0, max)
	for r := range ch {
		batch = append(batch[:0], r)
	fill:
		for len(batch) < max {
			select {
			case r, ok := <-ch:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		run(batch)
		clear(batch) // drop references to answered requests
	}
}

// write is one writer: it runs each batch of requests as one transaction.
func (b *Batcher) write() {
	defer b.wg.Done()
	w := &batchWriter{pool: b.pool, timeout: b.opt.Timeout, stats: &b.stats, faults: b.faults}
	defer w.release()
	drain(b.queue, b.opt.MaxBatch, w.run)
}
