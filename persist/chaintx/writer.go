package chaintx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The TransactionWriter (spec §3.2): requests are routed to worker
// hash(submitter) % N, so one submitter's allocations are serial and in
// order; each worker drains up to MaxBatch requests (plus the submitter's
// CREATED rows) into ONE transaction that allocates contiguous nonces.

type op struct {
	req  NewTx
	done chan opResult // buffered(1): the worker never blocks on it
}

type opResult struct {
	tx       Tx
	existing bool
	err      error
}

type worker struct {
	m     *Manager
	idx   int
	q     chan *op
	poke  chan struct{}
	mu    sync.Mutex
	poked map[Address]bool
	cache map[Address]uint64 // nonce cache: next nonce after this worker's last committed batch (spec §3.4)
}

func newWorker(m *Manager, idx int) *worker {
	return &worker{m: m, idx: idx, q: make(chan *op, m.cfg.QueueSize), poke: make(chan struct{}, 1),
		poked: map[Address]bool{}, cache: map[Address]uint64{}}
}

func (w *worker) enqueue(o *op) error {
	if w.m.ctx == nil || w.m.ctx.Err() != nil {
		return ErrStopped
	}
	select {
	case w.q <- o:
		w.m.met.QueueDepth.WithLabelValues(itoa(w.idx)).Set(float64(len(w.q)))
		return nil
	default:
		return ErrBusy
	}
}

func (w *worker) nudge(s Address) {
	w.mu.Lock()
	w.poked[s] = true
	w.mu.Unlock()
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

func (w *worker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			w.drainStopped()
			return
		case o := <-w.q:
			w.batch(ctx, o)
		case <-w.poke:
			w.mu.Lock()
			subs := make([]Address, 0, len(w.poked))
			for s := range w.poked {
				subs = append(subs, s)
			}
			clear(w.poked)
			w.mu.Unlock()
			for _, s := range subs {
				w.allocate(ctx, s, nil)
			}
		}
	}
}

func (w *worker) drainStopped() {
	for {
		select {
		case o := <-w.q:
			o.done <- opResult{err: ErrStopped}
		default:
			return
		}
	}
}

// batch drains the queue (up to MaxBatch) and allocates per submitter, in
// arrival order within each.
func (w *worker) batch(ctx context.Context, first *op) {
	ops := []*op{first}
	for len(ops) < w.m.cfg.MaxBatch {
		select {
		case o := <-w.q:
			ops = append(ops, o)
			continue
		default:
		}
		break
	}
	w.m.met.QueueDepth.WithLabelValues(itoa(w.idx)).Set(float64(len(w.q)))
	var order []Address
	bySub := map[Address][]*op{}
	for _, o := range ops {
		if _, ok := bySub[o.req.Submitter]; !ok {
			order = append(order, o.req.Submitter)
		}
		bySub[o.req.Submitter] = append(bySub[o.req.Submitter], o)
	}
	for _, s := range order {
		w.allocate(ctx, s, bySub[s])
	}
}

// allocate runs one writer transaction for submitter s: the requests ops
// and (room permitting) its CREATED rows; then broadcasts what it allocated.
func (w *worker) allocate(ctx context.Context, s Address, ops []*op) {
	m := w.m
	answer := func(err error, label string) {
		m.met.TxCreate.WithLabelValues(label).Add(float64(len(ops)))
		for _, o := range ops {
			o.done <- opResult{err: err}
		}
	}
	l, ok := m.lease(s)
	if !ok {
		answer(ErrNotLeader, "not_leader")
		return
	}
	signer := m.signers[s]
	fees, err := m.currentFees(ctx)
	if err != nil {
		answer(fmt.Errorf("chaintx: fees: %w", err), "error")
		return
	}
	// chain end of max(chain, cache, db); the node being unreachable does
	// not stop allocation (the database cursor alone never repeats a nonce).
	chainNext, cerr := m.cfg.Chain.PendingNonce(ctx, s)
	if cerr != nil {
		m.log.Warn("chaintx: pending nonce unavailable; allocating from cache and database", "submitter", s, "err", cerr)
		chainNext = 0
	}
	cacheNext := w.cache[s]
	reqs := make([]NewTx, len(ops))
	for i, o := range ops {
		reqs[i] = o.req
	}
	assign := func(dbNext uint64, txs []*Tx) (uint64, error) {
		next := max(chainNext, cacheNext, dbNext)
		for i, t := range txs {
			n := next + uint64(i)
			h, raw, err := signer.Sign(Unsigned{Nonce: n, Payload: t.Payload, Fees: fees})
			if err != nil {
				return 0, fmt.Errorf("chaintx: sign: %w", err)
			}
			t.Nonce, t.Hash = &n, h
			t.Signed = []Signed{{Hash: h, Raw: raw, Kind: KindOriginal, MaxFee: fees.MaxFee, MaxTip: fees.MaxTip}}
		}
		return next + uint64(len(txs)), nil
	}
	res, err := m.cfg.Store.Allocate(ctx, l, reqs, m.cfg.MaxBatch-len(ops), assign)
	if err != nil {
		delete(w.cache, s) // spec §3.4: a failed batch must not leave the cache ahead
		m.fenced(l, "allocate", err)
		answer(err, "error")
		return
	}
	if len(res.Allocated) > 0 {
		w.cache[s] = res.Next
	}
	m.met.TxCreate.WithLabelValues("allocated").Add(float64(len(res.Allocated))) // new requests and CREATED rows
	for i, o := range ops {
		if res.Existing[i] {
			m.met.TxCreate.WithLabelValues("existing").Inc()
		}
		o.done <- opResult{tx: res.Answers[i], existing: res.Existing[i]}
	}
	for _, t := range res.Allocated {
		m.log.Info("chaintx: allocated", "submitter", s, "tx_id", t.ID, "nonce", *t.Nonce, "tx_hash", t.Hash,
			"fencing_token", l.Token, "state_before", Created, "state_after", Allocated)
	}
	w.broadcast(ctx, l, res.Allocated)
}

// broadcast sends freshly allocated txs in nonce order and records TRACKING.
func (w *worker) broadcast(ctx context.Context, l Lease, txs []Tx) {
	if len(txs) == 0 {
		return
	}
	m := w.m
	rs := make([]SubmitResult, 0, len(txs))
	for _, t := range txs {
		res, errText := m.send(ctx, t.Latest().Raw)
		m.met.TxSubmit.WithLabelValues(res).Inc()
		rs = append(rs, SubmitResult{ID: t.ID, Err: errText})
	}
	// The write outlives a cancelled ctx: what was sent must be recorded.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := m.cfg.Store.Submitted(wctx, l, rs, m.cfg.ResubmitInterval); err != nil && !m.fenced(l, "submitted", err) {
		m.log.Warn("chaintx: recording broadcasts failed (the resubmit scheduler sends again)", "err", err)
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		for i, t := range txs {
			if rs[i].Err == "" {
				m.log.Debug("chaintx: submitted", "submitter", t.Submitter, "tx_id", t.ID, "nonce", *t.Nonce,
					"tx_hash", t.Hash, "fencing_token", l.Token, "state_before", Allocated, "state_after", Tracking)
			}
		}
	}
}
