package chaintx

import (
	"context"
	"fmt"
	"sync"
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
	sendQ chan []*group      // committed batches for the sender (run owns it)
	ahead map[*op]Tx         // the current batch's ops signed ahead (batch sets it; run's goroutine only)
}

// senderDepth bounds the committed batches waiting for their broadcast; a
// full queue stalls the worker (back-pressure, no unbounded growth).
const senderDepth = 4

func newWorker(m *Manager, idx int) *worker {
	return &worker{m: m, idx: idx, q: make(chan *op, m.cfg.QueueSize), poke: make(chan struct{}, 1),
		poked: map[Address]bool{}, cache: map[Address]uint64{}}
}

func (w *worker) enqueue(o *op) error {
	if !w.m.started.Load() || w.m.ctx.Err() != nil {
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
	// The sender broadcasts each committed batch (in commit order, so in
	// nonce order per submitter) while the worker allocates the next one.
	w.sendQ = make(chan []*group, senderDepth)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for gs := range w.sendQ {
			w.broadcast(ctx, gs)
		}
	}()
	defer func() { close(w.sendQ); <-sent }()
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
			v := w.prepare(ctx, nil, nil, subs...)
			if t, err := w.m.allocs.wait(ctx); err == nil {
				w.allocate(ctx, t, subs, map[Address][]*op{}, v)
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

// batch drains the queue (up to MaxBatch), asks the chain what it needs
// for those submitters (before waiting: an RPC never holds a committer),
// waits for a committer (allocGate), drains again what arrived meanwhile
// (late binding), and allocates per submitter, in arrival order within each.
//
// While it waits for the committer, the ops drained so far are signed
// ahead (signAhead): with the nonce cache known, the batch's guesses are
// then mostly signed by the time the committer claims it.
func (w *worker) batch(ctx context.Context, first *op) {
	ops := w.drain([]*op{first})
	pre := w.prepare(ctx, nil, ops)
	ahead := w.signAhead(ops, pre)
	t, err := w.m.allocs.wait(ctx)
	if err != nil {
		<-ahead.done
		for _, o := range ops {
			o.done <- opResult{err: ErrStopped}
		}
		return
	}
	<-ahead.done
	w.ahead = ahead.txs
	defer func() { w.ahead = nil }()
	ops = w.drain(ops)
	w.m.met.QueueDepth.WithLabelValues(itoa(w.idx)).Set(float64(len(w.q)))
	var order []Address
	bySub := map[Address][]*op{}
	for _, o := range ops {
		if _, ok := bySub[o.req.Submitter]; !ok {
			order = append(order, o.req.Submitter)
		}
		bySub[o.req.Submitter] = append(bySub[o.req.Submitter], o)
	}
	w.allocate(ctx, t, order, bySub, w.prepare(ctx, pre, ops))
}

// presigned are ops signed ahead, each with the nonce the batch's guess
// would give it if nothing else of its submitter comes before it.
type presigned struct {
	done chan struct{} // closed once txs is complete
	txs  map[*op]Tx
}

// signAhead signs, in a goroutine, the ops of each submitter whose nonce
// cache is known, in their order, from max(chain, cache): what allocGroup's
// guess will give them unless the batch changes (it only grows at the end,
// so those ops keep their places). allocGroup uses a presigned tx only if
// its nonce is the one the guess gives; otherwise it signs again.
func (w *worker) signAhead(ops []*op, v *batchChain) *presigned {
	p := &presigned{done: make(chan struct{}), txs: make(map[*op]Tx, len(ops))}
	type job struct {
		o     *op
		nonce uint64
	}
	var jobs []job
	if v.feesErr == nil {
		next := map[Address]uint64{}
		for _, o := range ops {
			s := o.req.Submitter
			n, ok := next[s]
			if !ok {
				c, cached := w.cache[s]
				if !cached {
					continue
				}
				n = max(v.pending[s], c)
			}
			jobs, next[s] = append(jobs, job{o, n}), n+1
		}
	}
	if len(jobs) == 0 {
		close(p.done)
		return p
	}
	fees := v.fees
	go func() {
		defer close(p.done)
		for _, j := range jobs {
			t := Tx{Submitter: j.o.req.Submitter, RequestID: j.o.req.RequestID, Payload: j.o.req.Payload}
			if signTx(w.m.signers[t.Submitter], &t, j.nonce, fees) == nil {
				p.txs[j.o] = t
			}
		}
	}()
	return p
}

// signTx signs t with nonce n as its original.
func signTx(signer Signer, t *Tx, n uint64, fees Fees) error {
	h, raw, err := signer.Sign(Unsigned{Nonce: n, Payload: t.Payload, Fees: fees})
	if err != nil {
		return fmt.Errorf("chaintx: sign: %w", err)
	}
	t.Nonce, t.Hash = &n, h
	t.Signed = []Signed{{Hash: h, Raw: raw, Kind: KindOriginal, MaxFee: fees.MaxFee, MaxTip: fees.MaxTip}}
	return nil
}

// drain appends queued ops to ops, up to MaxBatch in all.
func (w *worker) drain(ops []*op) []*op {
	for len(ops) < w.m.cfg.MaxBatch {
		select {
		case o := <-w.q:
			ops = append(ops, o)
			continue
		default:
		}
		break
	}
	return ops
}

// batchChain is what a batch needs from the chain: the fees and, per
// submitter, the pending nonce (the chain end of max(chain, cache, db)).
type batchChain struct {
	fees    Fees
	feesErr error
	pending map[Address]uint64
}

// prepare completes v (nil: a new one) for the submitters of ops (or subs),
// asking the chain only what v does not have yet.
func (w *worker) prepare(ctx context.Context, v *batchChain, ops []*op, subs ...Address) *batchChain {
	m := w.m
	if v == nil {
		v = &batchChain{pending: map[Address]uint64{}}
		v.fees, v.feesErr = m.currentFees(ctx)
	}
	ask := func(s Address) {
		if _, ok := v.pending[s]; ok {
			return
		}
		// The node being unreachable does not stop allocation (the
		// database cursor alone never repeats a nonce).
		n, err := m.cfg.Chain.PendingNonce(ctx, s)
		if err != nil {
			m.log.Warn("chaintx: pending nonce unavailable; allocating from cache and database", "submitter", s, "err", err)
			n = 0
		}
		v.pending[s] = n
	}
	for _, o := range ops {
		ask(o.req.Submitter)
	}
	for _, s := range subs {
		ask(s)
	}
	return v
}

// group is one submitter's part of a writer batch.
type group struct {
	l   Lease
	ops []*op
	res AllocResult
}

// allocate runs, in the shared writer transaction of ticket t (other
// workers' batches in it too), the allocation for the submitters subs (in
// order): the requests bySub[s] and (room permitting) each one's CREATED
// rows; then broadcasts what it allocated and records that in one more.
func (w *worker) allocate(ctx context.Context, t *ticket, subs []Address, bySub map[Address][]*op, v *batchChain) {
	m := w.m
	ran := false
	defer func() {
		if !ran {
			t.run(nil) // the committer waits for every ticket it claimed
		}
	}()
	answer := func(ops []*op, err error, label string) {
		m.met.TxCreate.WithLabelValues(label).Add(float64(len(ops)))
		for _, o := range ops {
			o.done <- opResult{err: err}
		}
	}
	var groups []*group
	for _, s := range subs {
		l, ok := m.lease(s)
		if !ok {
			answer(bySub[s], ErrNotLeader, "not_leader")
			continue
		}
		groups = append(groups, &group{l: l, ops: bySub[s]})
	}
	if len(groups) == 0 {
		return
	}
	if v.feesErr != nil {
		for _, g := range groups {
			answer(g.ops, fmt.Errorf("chaintx: fees: %w", v.feesErr), "error")
		}
		return
	}
	gs := make([]AllocGroup, len(groups))
	for i, g := range groups {
		gs[i] = w.allocGroup(g, v.fees, v.pending[g.l.Submitter])
	}
	ran = true
	res, err := t.run(gs)
	if err != nil {
		for _, g := range groups {
			delete(w.cache, g.l.Submitter) // spec §3.4: a failed batch must not leave the cache ahead
			answer(g.ops, err, "error")
		}
		m.log.Warn("chaintx: writer batch failed", "err", err)
		return
	}
	live := groups[:0]
	for i, g := range groups {
		g.res = res[i]
		if g.res.Err != nil {
			delete(w.cache, g.l.Submitter)
			m.fenced(g.l, "allocate", g.res.Err)
			answer(g.ops, g.res.Err, "error")
			continue
		}
		if len(g.res.Allocated) > 0 {
			w.cache[g.l.Submitter] = g.res.Next
		}
		m.met.TxCreate.WithLabelValues("allocated").Add(float64(len(g.res.Allocated))) // new requests and CREATED rows
		for j, o := range g.ops {
			if g.res.Existing[j] {
				m.met.TxCreate.WithLabelValues("existing").Inc()
			}
			o.done <- opResult{tx: g.res.Answers[j], existing: g.res.Existing[j]}
		}
		for _, t := range g.res.Allocated {
			m.log.Info("chaintx: allocated", "submitter", t.Submitter, "tx_id", t.ID, "nonce", *t.Nonce, "tx_hash", t.Hash,
				"fencing_token", g.l.Token, "state_before", Created, "state_after", Allocated)
		}
		live = append(live, g)
	}
	w.sendQ <- live
}

// allocGroup is the store's view of g: its requests and the nonce policy
// max(chain, cache, db) with signing at allocation.
func (w *worker) allocGroup(g *group, fees Fees, chainNext uint64) AllocGroup {
	m, s := w.m, g.l.Submitter
	cacheNext, cached := w.cache[s]
	signer := m.signers[s]
	reqs := make([]NewTx, len(g.ops))
	for i, o := range g.ops {
		reqs[i] = o.req
	}
	sign := func(txs []*Tx, next uint64) error {
		for i, t := range txs {
			if err := signTx(signer, t, next+uint64(i), fees); err != nil {
				return err
			}
		}
		return nil
	}
	ag := AllocGroup{Lease: g.l, Reqs: reqs, MaxCreated: max(0, m.cfg.MaxBatch-len(g.ops)),
		Assign: func(dbNext uint64, txs []*Tx) (uint64, error) {
			next := max(chainNext, cacheNext, dbNext)
			if err := sign(txs, next); err != nil {
				return 0, err
			}
			return next + uint64(len(txs)), nil
		}}
	if cached {
		ag.Guess = w.guessGroup(g.ops, max(chainNext, cacheNext), signer, fees)
	}
	return ag
}

// guessGroup is the guess for ops (signed with the nonces from next, the
// cache's view max(chain, cache); signed ahead where signAhead gave the
// same nonce) for Store.Allocate's one-round-trip path; nil when a
// request_id repeats within ops (the regular path answers the repeat).
func (w *worker) guessGroup(ops []*op, next uint64, signer Signer, fees Fees) *AllocGuess {
	seen := make(map[string]bool, len(ops))
	g := &AllocGuess{Next: next, Txs: make([]Tx, len(ops))}
	for i, o := range ops {
		r := o.req
		if r.RequestID != "" {
			if seen[r.RequestID] {
				return nil
			}
			seen[r.RequestID] = true
		}
		n := next + uint64(i)
		if t, ok := w.ahead[o]; ok && *t.Nonce == n && t.Signed[0].MaxFee.Cmp(fees.MaxFee) == 0 && t.Signed[0].MaxTip.Cmp(fees.MaxTip) == 0 {
			g.Txs[i] = t
			continue
		}
		g.Txs[i] = Tx{Submitter: r.Submitter, RequestID: r.RequestID, Payload: r.Payload}
		if signTx(signer, &g.Txs[i], n, fees) != nil {
			return nil // the regular path signs again and reports the error
		}
	}
	return g
}

// broadcast sends freshly allocated txs in nonce order per submitter and
// records TRACKING, for every group in one transaction.
func (w *worker) broadcast(ctx context.Context, groups []*group) {
	m := w.m
	if ctx.Err() != nil {
		return // stopping: the next leader's resubmit scheduler sends them (AllocatedGrace)
	}
	var sg []SubmitGroup
	var gl []*group
	for _, g := range groups {
		if len(g.res.Allocated) == 0 {
			continue
		}
		rs := make([]SubmitResult, 0, len(g.res.Allocated))
		for _, t := range g.res.Allocated {
			res, errText := m.send(ctx, t.Latest().Raw)
			m.met.TxSubmit.WithLabelValues(res).Inc()
			rs = append(rs, SubmitResult{ID: t.ID, Err: errText})
		}
		sg, gl = append(sg, SubmitGroup{Lease: g.l, Results: rs}), append(gl, g)
	}
	if len(sg) == 0 {
		return
	}
	errs, err := m.records.do(context.Background(), sg) // outlives a cancelled ctx: what was sent must be recorded
	if err != nil {
		m.log.Warn("chaintx: recording broadcasts failed (the resubmit scheduler sends again)", "err", err)
		return
	}
	for i, e := range errs {
		m.fenced(gl[i].l, "submitted", e)
	}
}
