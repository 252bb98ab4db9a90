package chaintx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/big"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config wires a Manager.
type Config struct {
	Store   Store
	Chain   Chain
	Signers []Signer // the submitters this node can act for (one key each)
	// NodeID is this node's name in submitter_lease.owner_node; unique per
	// process start ("": NewNodeID(), host name + random, issue 33 item 5:
	// host-pid collided for containers with the same host name and pid 1).
	NodeID string
	Lease  LeaseConfig

	Workers   int // writer workers (hash(submitter) % Workers); default 16
	QueueSize int // per worker; a full queue answers ErrBusy; default 1024
	MaxBatch  int // requests + CREATED rows per worker batch; default 256
	// Committers: writer transactions at once; each merges the batches of
	// every worker waiting for one (combiner); default 2.
	Committers int

	Finality         uint64        // blocks (receipt's block included) for CONFIRMED / FAILED_FINAL; default 12
	TrackInterval    time.Duration // period of the tracker loop; default 500ms
	ReceiptInterval  time.Duration // "not found" -> next check after; default 1s
	ReceiptMaxDelay  time.Duration // back-off cap after check errors; default 30s
	ResubmitInterval time.Duration // a pending tx without receipt is resent this often; default 30s
	// ResubmitMaxInterval caps the STUCK back-off (backoff.go: the delay
	// doubles from ResubmitInterval); default 10m, at least ResubmitInterval.
	ResubmitMaxInterval time.Duration
	StuckAfter          time.Duration // no receipt this long after allocation -> STUCK; default 10m
	FeeCacheTTL         time.Duration // fee suggestions are reused this long; default 2s
	// RPCTimeout bounds every call of Chain (rpc.go; --chain-rpc-timeout);
	// default 5s.
	RPCTimeout time.Duration

	Hook    Hook     // nil: StaticHook(ActionNoop)
	Metrics *Metrics // nil: unregistered
	Logger  *slog.Logger
}

func (c *Config) defaults() error {
	if c.Store == nil || c.Chain == nil || len(c.Signers) == 0 {
		return errors.New("chaintx: Store, Chain and Signers are required")
	}
	if c.NodeID == "" {
		c.NodeID = NewNodeID()
	}
	c.Lease.defaults()
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defi := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	defi(&c.Workers, 16)
	defi(&c.QueueSize, 1024)
	defi(&c.MaxBatch, 256)
	defi(&c.Committers, 2)
	if c.Finality == 0 {
		c.Finality = 12
	}
	def(&c.TrackInterval, 500*time.Millisecond)
	def(&c.ReceiptInterval, time.Second)
	def(&c.ReceiptMaxDelay, 30*time.Second)
	def(&c.ResubmitInterval, 30*time.Second)
	def(&c.ResubmitMaxInterval, 10*time.Minute)
	c.ResubmitMaxInterval = max(c.ResubmitMaxInterval, c.ResubmitInterval)
	def(&c.StuckAfter, 10*time.Minute)
	def(&c.FeeCacheTTL, 2*time.Second)
	def(&c.RPCTimeout, 5*time.Second)
	if c.Hook == nil {
		c.Hook = StaticHook(ActionNoop)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Manager runs the use cases of spec 002 for the submitters it has keys
// for: CreateTx (through the writer workers), GetTx, the lease keeper, and
// the tracker (receipts, finality, resubmission, STUCK + hook). Every
// effect is leader-only and fenced.
type Manager struct {
	cfg       Config
	log       *slog.Logger
	met       *Metrics
	signers   map[Address]Signer
	subs      []Address // sorted as configured
	workers   []*worker
	prechecks *combiner[RequestRef, *Tx]    // Create's entry checks of request_ids, merged (Start makes them)
	allocs    *allocGate                    // the workers' nonce allocations, merged
	records   *combiner[SubmitGroup, error] // the workers' broadcast records, merged

	mu     sync.Mutex
	leases map[Address]heldLease
	fees   Fees
	feesAt time.Time

	ctx     context.Context // made in New, cancelled by Close
	cancel  context.CancelFunc
	started atomic.Bool // Start ran: the workers take requests
	wg      sync.WaitGroup
}

// heldLease is a lease as this node sees it.
type heldLease struct {
	l      Lease
	actTil time.Time // local clock: act only before this (request start + Duration - SkewAllowance)
}

// New returns a stopped Manager; Start runs it.
func New(cfg Config) (*Manager, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	cfg.Chain = newTimeoutChain(cfg.Chain, cfg.RPCTimeout, cfg.Metrics)
	m := &Manager{cfg: cfg, log: cfg.Logger.With("node_id", cfg.NodeID), met: cfg.Metrics,
		signers: map[Address]Signer{}, leases: map[Address]heldLease{}}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	for _, s := range cfg.Signers {
		if _, dup := m.signers[s.Address()]; dup {
			return nil, fmt.Errorf("chaintx: two keys for submitter %s", s.Address())
		}
		m.signers[s.Address()] = s
		m.subs = append(m.subs, s.Address())
	}
	for i := range cfg.Workers {
		m.workers = append(m.workers, newWorker(m, i))
		m.met.QueueDepth.WithLabelValues(itoa(i)).Set(0) // every worker's series exists from the start
	}
	return m, nil
}

// NodeID is this node's name in the submitter leases (Config.NodeID, or
// the one New generated).
func (m *Manager) NodeID() string { return m.cfg.NodeID }

// NewNodeID is a node id unique per process start: the host name and 8
// random bytes (the lease renews for its own id, so two processes with one
// id would both act as leader: fencing could not keep them apart).
func NewNodeID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "node"
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("chaintx: no randomness for a node id: %v", err)) // crypto/rand never fails on Linux
	}
	return host + "-" + hex.EncodeToString(b[:])
}

// Submitters are the addresses this node has keys for.
func (m *Manager) Submitters() []Address { return append([]Address(nil), m.subs...) }

// Start runs the lease keeper, the writer workers and the tracker until Close.
func (m *Manager) Start() {
	m.newCombiners()
	m.renewAll(m.ctx) // be leader (if free) before the first request
	m.goLoop(m.leaseLoop)
	for _, w := range m.workers {
		m.goLoop(w.run)
	}
	m.goLoop(m.trackLoop)
	m.started.Store(true)
}

func (m *Manager) goLoop(f func(ctx context.Context)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f(m.ctx)
	}()
}

// Close stops every loop and waits for them, then releases the leases it
// holds (issue 33 item 4: a restarted node leads at once instead of
// answering NOT_LEADER until they expire). Releasing is safe only now: no
// write of this node is in flight, and the release waits for any fenced
// transaction still holding the lease row. A crash releases nothing: the
// leases expire and the next leader takes over with a higher token.
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait()
	if m.allocs != nil { // the workers are gone: no call follows
		m.prechecks.stop()
		m.allocs.stop()
		m.records.stop()
	}
	m.releaseAll()
}

// releaseAll gives up every lease this node holds (once: Close may run twice).
func (m *Manager) releaseAll() {
	m.mu.Lock()
	held := make([]Lease, 0, len(m.leases))
	for s, h := range m.leases {
		if h.l.Leader {
			held = append(held, h.l)
		}
		delete(m.leases, s)
	}
	m.mu.Unlock()
	for _, l := range held {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		err := m.cfg.Store.ReleaseLease(ctx, l)
		cancel()
		if err != nil {
			m.log.Warn("chaintx: lease release failed (it expires)", "submitter", l.Submitter, "fencing_token", l.Token, "err", err)
			continue
		}
		m.log.Info("chaintx: lease released", "submitter", l.Submitter, "fencing_token", l.Token)
	}
}

// releaseTimeout bounds one lease release at Close.
const releaseTimeout = 2 * time.Second

// Create is CreateTxUseCase: pre-check of (submitter, request_id), then the
// submitter's writer worker allocates in a batch (checking request_id
// again before a nonce is used). existing is true when the request_id
// already named a tx (it is answered, nothing is created). Once the
// request is queued, an answer not known in time is ErrOutcomeUnknown:
// the writer still holds it and may allocate and send it.
func (m *Manager) Create(ctx context.Context, n NewTx) (t Tx, existing bool, err error) {
	if _, ok := m.signers[n.Submitter]; !ok {
		return Tx{}, false, ErrNoSubmitter
	}
	if n.RequestID != "" && !n.AssignedID {
		switch t, err := m.precheck(ctx, RequestRef{n.Submitter, n.RequestID}); {
		case err == nil:
			m.met.TxCreate.WithLabelValues("existing").Inc()
			return t, true, nil
		case !errors.Is(err, ErrNotFound):
			return Tx{}, false, err
		}
	}
	o := &op{req: n, done: make(chan opResult, 1)}
	if err := m.workerOf(n.Submitter).enqueue(o); err != nil {
		m.met.TxCreate.WithLabelValues("busy").Inc()
		return Tx{}, false, err
	}
	select {
	case r := <-o.done:
		return r.tx, r.existing, r.err
	case <-ctx.Done():
		// The worker keeps the request (and answers into the buffered
		// channel): it may still be allocated and sent.
		m.met.TxCreate.WithLabelValues("unknown").Inc()
		return Tx{}, false, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	case <-m.ctx.Done(): // closing: a request queued after the workers' last drain is never answered
		select {
		case r := <-o.done:
			return r.tx, r.existing, r.err
		case <-time.After(time.Second):
			m.met.TxCreate.WithLabelValues("unknown").Inc()
			return Tx{}, false, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ErrStopped)
		}
	}
}

// precheck is the entry check of a request_id (spec §3.10): the tx that
// already has it, or ErrNotFound. The checks of concurrent requests go out
// together, one query (prechecks); a stopped manager asks on its own.
func (m *Manager) precheck(ctx context.Context, r RequestRef) (Tx, error) {
	if m.prechecks != nil {
		res, err := m.prechecks.do(ctx, []RequestRef{r})
		switch {
		case err == nil && res[0] != nil:
			return *res[0], nil
		case err == nil:
			return Tx{}, ErrNotFound
		case !errors.Is(err, errCombinerStopped):
			return Tx{}, err
		}
	}
	return m.cfg.Store.GetByRequest(ctx, r.Submitter, r.RequestID)
}

// Get is GetTxUseCase by id.
func (m *Manager) Get(ctx context.Context, id TxID) (Tx, error) { return m.cfg.Store.Get(ctx, id) }

// GetByRequest is GetTxUseCase by (submitter, request_id).
func (m *Manager) GetByRequest(ctx context.Context, s Address, req string) (Tx, error) {
	return m.cfg.Store.GetByRequest(ctx, s, req)
}

// Completions is ListTxCompletionsUseCase.
func (m *Manager) Completions(ctx context.Context, after int64, limit int) ([]Completion, error) {
	return m.cfg.Store.Completions(ctx, after, limit)
}

// Nudge asks the submitter's writer to allocate its CREATED rows now
// (after a withdrawal inserted one); otherwise the tracker does it within
// TrackInterval.
func (m *Manager) Nudge(s Address) {
	if _, ok := m.signers[s]; ok {
		m.workerOf(s).nudge(s)
	}
}

func (m *Manager) workerOf(s Address) *worker {
	h := fnv.New32a()
	h.Write([]byte(s))
	return m.workers[h.Sum32()%uint32(len(m.workers))]
}

// lease returns the submitter's lease if this node may act on it now.
func (m *Manager) lease(s Address) (Lease, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.leases[s]
	if !ok || !h.l.Leader || !time.Now().Before(h.actTil) {
		return Lease{}, false
	}
	return h.l, true
}

// Leader reports whether this node acts for s now (tests, health).
func (m *Manager) Leader(s Address) (Lease, bool) { return m.lease(s) }

// fenced handles ErrFenced from a critical write: counted, logged, and the
// node stops acting for the submitter until it acquires the lease again.
func (m *Manager) fenced(l Lease, what string, err error) bool {
	if !errors.Is(err, ErrFenced) {
		return false
	}
	m.met.LeaseFenced.Inc()
	m.log.Warn("chaintx: write fenced: stepping down", "submitter", l.Submitter, "fencing_token", l.Token, "write", what)
	m.mu.Lock()
	if h, ok := m.leases[l.Submitter]; ok && h.l.Token == l.Token {
		h.l.Leader = false
		m.leases[l.Submitter] = h
	}
	m.mu.Unlock()
	return true
}

func (m *Manager) leaseLoop(ctx context.Context) {
	Every(ctx, m.cfg.Lease.RenewInterval, func() { m.renewAll(ctx) })
}

// Every runs fn every d until ctx ends (the loops of the manager and of its
// users, e.g. the withdrawal settler).
func Every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

func (m *Manager) renewAll(ctx context.Context) {
	for _, s := range m.subs {
		start := time.Now()
		l, err := m.cfg.Store.AcquireLease(ctx, s, m.cfg.NodeID, m.cfg.Lease.Duration)
		if err != nil {
			if ctx.Err() == nil {
				m.met.LeaseAcquire.WithLabelValues("error").Inc()
				m.log.Warn("chaintx: lease acquire failed", "submitter", s, "err", err)
			}
			continue
		}
		m.mu.Lock()
		prev := m.leases[s]
		m.leases[s] = heldLease{l: l, actTil: start.Add(m.cfg.Lease.Duration - m.cfg.Lease.SkewAllowance)}
		m.mu.Unlock()
		switch {
		case !l.Leader:
			m.met.LeaseAcquire.WithLabelValues("not_leader").Inc()
		case prev.l.Leader && prev.l.Token == l.Token:
			m.met.LeaseAcquire.WithLabelValues("renewed").Inc()
		default:
			m.met.LeaseAcquire.WithLabelValues("acquired").Inc()
			m.log.Info("chaintx: lease acquired", "submitter", s, "fencing_token", l.Token)
		}
	}
}

// currentFees returns EIP-1559 fees, cached for FeeCacheTTL.
func (m *Manager) currentFees(ctx context.Context) (Fees, error) {
	m.mu.Lock()
	f, at := m.fees, m.feesAt
	m.mu.Unlock()
	if f.MaxFee != nil && time.Since(at) < m.cfg.FeeCacheTTL {
		return f, nil
	}
	f, err := m.cfg.Chain.Fees(ctx)
	if err != nil {
		return Fees{}, err
	}
	m.mu.Lock()
	m.fees, m.feesAt = f, time.Now()
	m.mu.Unlock()
	return f, nil
}

// bump raises fees by 25% + 1 wei (nodes want >= 10% to replace), and to
// at least the current suggestion.
func bump(prev, now Fees) Fees {
	up := func(a, b *big.Int) *big.Int {
		v := new(big.Int).Mul(a, big.NewInt(125))
		v.Div(v, big.NewInt(100))
		v.Add(v, big.NewInt(1))
		if b != nil && b.Cmp(v) > 0 {
			v.Set(b)
		}
		return v
	}
	f := Fees{MaxFee: up(prev.MaxFee, now.MaxFee), MaxTip: up(prev.MaxTip, now.MaxTip)}
	if f.MaxTip.Cmp(f.MaxFee) > 0 {
		f.MaxFee = new(big.Int).Set(f.MaxTip)
	}
	return f
}

// send broadcasts raw and classifies the answer for metrics and records.
func (m *Manager) send(ctx context.Context, raw []byte) (result, errText string) {
	err := m.cfg.Chain.Send(ctx, raw)
	switch {
	case err == nil:
		return "ok", ""
	case errors.Is(err, ErrAlreadyKnown):
		return "known", ""
	case errors.Is(err, ErrNonceTooLow):
		// The nonce is used: by this tx (mined; the receipt checker finds
		// it) or by another one (a replacement of ours, or a foreign use of
		// the key: then no receipt ever comes and the tx goes STUCK).
		return "nonce_too_low", ""
	default:
		return "error", err.Error()
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// submitted records one submitter's broadcasts (Store.Submitted of one group).
func (m *Manager) submitted(ctx context.Context, l Lease, rs []SubmitResult) error {
	errs, err := m.cfg.Store.Submitted(ctx, []SubmitGroup{{Lease: l, Results: rs}}, m.cfg.ResubmitInterval)
	if err != nil {
		return err
	}
	return errs[0]
}
