package replication

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/logging"
)

// Mode is how the log follows the primary's acknowledgements.
type Mode string

const (
	// ModeOff: no replicated log (the default; docs/design.md's single-node
	// promise: an acknowledged command is fsynced on this host's disk).
	ModeOff Mode = "off"
	// ModeSync: a command is acknowledged once fsynced locally AND stored
	// by a quorum of the stream's replicas; nothing a take-over could
	// discard ever leaves the process.
	ModeSync Mode = "sync"
	// ModeAsync: acknowledged once fsynced locally; the log follows
	// (Async). A take-over after the primary's host dies loses the lag.
	ModeAsync Mode = "async"
)

// Role is what a node does.
type Role string

const (
	RolePrimary Role = "primary" // sequences commands and writes the log
	RoleStandby Role = "standby" // applies the log; serves reads only
)

// NodeConfig configures a replicated node.
type NodeConfig struct {
	Log  Config
	Mode Mode // ModeSync or ModeAsync
	Role Role // the role the node starts in
	// AdoptVenue, if set, makes the node's data dir take the venue of the
	// log's epoch markers (its WAL id; persist.VenueIdentity), or refuses a
	// log of another venue. Log.Venue is the node's own, if it has one.
	AdoptVenue func(venue string) error
	// HashEvery: every node hashes its state at each multiple of it (off the
	// acknowledgement path); the primary appends its hashes to the log and a
	// standby compares them, stopping on a mismatch (DefaultHashEvery if 0).
	HashEvery uint64
	// Advertise is this node's HTTP address, written in its epoch marker,
	// so a standby can tell clients where the primary is.
	Advertise string
	// Failover is FailoverManual (promotion by an operator; "" means it)
	// or FailoverAuto (failover.go); LeaseTTL its lease's TTL
	// (DefaultFailoverLeaseTTL if 0). Auto is the process's open Failover
	// (OpenFailover) with FailoverAuto, nil otherwise.
	Failover string
	LeaseTTL time.Duration
	Auto     *Failover
	// CreateVenue gives this node's data dir a venue id of its own: called
	// when a node without one claims a log that names none (the first
	// primary of a venue under automatic failover, which started as a
	// standby).
	CreateVenue func() (string, error)
	Logger      *slog.Logger
}

// DefaultNodeID is the host name plus 8 random hex digits.
func DefaultNodeID() string {
	h, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return h + "-" + hex.EncodeToString(b[:])
}

// Validate checks the configuration.
func (c *NodeConfig) Validate() error {
	switch {
	case c.Mode != ModeSync && c.Mode != ModeAsync:
		return fmt.Errorf("replication: mode %q: want %s or %s", c.Mode, ModeSync, ModeAsync)
	case c.Role != RolePrimary && c.Role != RoleStandby:
		return fmt.Errorf("replication: role %q: want %s or %s", c.Role, RolePrimary, RoleStandby)
	case c.Log.URL == "":
		return errors.New("replication: no NATS URL (--replication-url)")
	case c.Failover != "" && c.Failover != FailoverManual && c.Failover != FailoverAuto:
		return fmt.Errorf("replication: failover %q: want %s or %s", c.Failover, FailoverManual, FailoverAuto)
	case c.Failover == FailoverAuto && c.Mode != ModeSync:
		return fmt.Errorf("replication: --failover auto needs --replication sync, not %s: a rejoin discards the WAL past the log, which async mode has acknowledged", c.Mode)
	case c.LeaseTTL < 0:
		return fmt.Errorf("replication: lease TTL %v", c.LeaseTTL)
	}
	return nil
}

// ErrAlreadyPrimary: Promote on a node that is already the primary.
var ErrAlreadyPrimary = errors.New("replication: this node is already the primary")

// ErrPromoted is the cause a Node's Promoted context carries.
var ErrPromoted = errors.New("replication: promoted to primary")

// Node is one exchange process of a replicated venue: the primary (its
// pipeline writes the log) or a standby (its pipeline applies the log),
// promoted by Promote. Its pipeline must be started with
// journal.Config.Standby: every node starts by reading the log.
type Node struct {
	cfg     NodeConfig
	log     *Log
	pl      *journal.Pipeline
	standby *Standby
	async   *Async

	mu        sync.Mutex
	primary   atomic.Bool
	promoted  chan struct{} // closed by Promote
	rejoin    chan struct{} // closed when an automatic take-over failed: serve again as a standby
	rejoinOne sync.Once
	newWriter atomic.Pointer[string] // fenced: the node that claimed the log after this one
	hashes    *hashCheck
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	failed    atomic.Pointer[error] // why the standby or async loop stopped
}

// StartNode opens the log and starts the node in its role: a primary
// reads the log to its end and claims it (appending its own WAL's
// unreplicated tail); a standby starts following it.
func StartNode(ctx context.Context, cfg NodeConfig, pl *journal.Pipeline) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Log.Logger = cfg.Logger
	if cfg.Advertise != "" {
		cfg.Log.Node = cfg.Log.Node + "@" + cfg.Advertise
	}
	l, err := Open(ctx, cfg.Log)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: l, pl: pl, standby: NewStandby(l, pl), promoted: make(chan struct{}), rejoin: make(chan struct{})}
	n.standby.adopt = cfg.AdoptVenue
	n.standby.createVenue = cfg.CreateVenue
	if cfg.Auto != nil {
		n.standby.lease = cfg.Auto.lease
	}
	if cfg.HashEvery == 0 {
		cfg.HashEvery = DefaultHashEvery
	}
	n.hashes = newHashCheck(cfg.HashEvery)
	n.standby.hashes = n.hashes
	pl.SetStateHashHook(cfg.HashEvery, n.hashes.hook(l, n.Primary, n.stop))
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if cfg.Mode == ModeAsync {
		cfg.Logger.Warn("replication: ASYNC mode: a command is acknowledged before the replicated log holds it; " +
			"if this host dies, a standby that takes over loses what the log had not yet stored (ubs_replication_lag_commands)")
	}
	if cfg.Role == RolePrimary {
		if err := n.promote(ctx); err != nil {
			n.Close()
			return nil, err
		}
		return n, nil
	}
	n.run(func(ctx context.Context) error {
		err := n.standby.Run(ctx)
		if err != nil && ctx.Err() == nil && cfg.Auto != nil && !diverged(err) {
			// Under automatic failover a standby whose following failed
			// (not a divergence: that stops it for an operator) serves
			// again as a standby, which prepares its data dir again.
			go n.rejoinAfter(cfg.Auto.lease.cfg.TTL)
		}
		return err
	})
	cfg.Logger.Info("replication: standby following the log", "stream", l.cfg.Stream, "from_seq", pl.DurableSeq()+1)
	if cfg.Auto != nil {
		n.wg.Add(1)
		go n.takeOver(cfg.Auto)
	}
	return n, nil
}

// takeOver waits for the lease beside the standby's following, then
// promotes the node (Promoted is closed: the process serves again as the
// primary, and the lease stays held across that restart). A promotion
// that fails releases the lease, so another node may try, and asks the
// process to serve again as a standby (Rejoin).
func (n *Node) takeOver(f *Failover) {
	defer n.wg.Done()
	// ErrLeaseHeld: this process kept the lease through its serving again
	// as a standby (a fenced primary): it is the one to take over.
	if _, err := f.lease.Acquire(n.ctx); err != nil && !errors.Is(err, ErrLeaseHeld) {
		return // closed
	}
	if err := n.Err(); err != nil { // its following failed: never the primary (the rejoin runs it again)
		n.cfg.Logger.Warn("replication: lease won by a standby whose following failed; releasing it", "err", err)
		f.release()
		return
	}
	t0 := time.Now()
	n.cfg.Logger.Info("replication: lease won: taking over as the primary", "seq", n.pl.DurableSeq())
	// The log may be electing a leader (its leader's host died with the
	// primary: 4-9 s here): while this node holds the lease it tries again,
	// rather than giving the lease up after one attempt and leaving the
	// next node to wait a TTL and fail the same way.
	epoch, err := n.promoteWhile(n.ctx, f.lease.Held)
	if errors.Is(err, ErrAlreadyPrimary) {
		// An operator's promotion (POST .../promote, which under auto
		// needs the lease this node holds) got there first: the node is
		// the primary, the lease stays held.
		epoch, err = n.log.Epoch(), nil
	}
	if err == nil {
		f.takeovers.Add(1)
		n.cfg.Logger.Info("replication: took over", "epoch", epoch, "took", time.Since(t0))
		return
	}
	if n.ctx.Err() != nil {
		return
	}
	logging.Critical(n.ctx, n.cfg.Logger, "replication: taking over failed; releasing the lease and serving again as a standby", "err", err)
	f.release()
	n.rejoinAfter(f.lease.cfg.TTL)
}

// retryable tells a failed promotion that may succeed if tried again
// (the log unreachable, electing a leader) from one that will not: this
// node's state, WAL or files, its venue, the lease, a record it cannot
// read, its pipeline or connection closed.
func retryable(err error) bool {
	return !diverged(err) && !definitive(err) && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrFenced) &&
		!errors.Is(err, ErrAlreadyPrimary) && !errors.Is(err, errSwitched) && !errors.Is(err, ErrNodeClosed) &&
		!errors.Is(err, ErrRecord) && !errors.Is(err, nats.ErrConnectionClosed) &&
		!errors.Is(err, journal.ErrStopped) && !errors.Is(err, journal.ErrSequence) &&
		!errors.Is(err, journal.ErrFailed) && !errors.Is(err, journal.ErrClosed)
}

// diverged tells an error that stops a standby for an operator: its state
// or its WAL differs from the log, or the log is another venue's. It
// applies nothing more, and never takes over.
func diverged(err error) bool {
	return errors.Is(err, ErrDivergedState) || errors.Is(err, ErrDiverged) || errors.Is(err, ErrOtherVenue)
}

// rejoinAfter asks the process, after d (so that another node may take
// over first and a failure that repeats cannot spin), to serve again as a
// standby.
func (n *Node) rejoinAfter(d time.Duration) {
	select {
	case <-n.ctx.Done():
	case <-time.After(d):
	}
	n.rejoinOne.Do(func() { close(n.rejoin) })
}

// Rejoin is closed when the process must serve again as a standby under
// automatic failover: the lease was lost, the log fenced this primary, or
// a take-over failed. Nil (never closed) with manual failover.
func (n *Node) Rejoin() <-chan struct{} {
	if n.cfg.Auto == nil {
		return nil
	}
	return n.rejoin
}

// Lost is closed when the lease of this primary ends (nil unless the node
// is a primary under automatic failover).
func (n *Node) Lost() <-chan struct{} {
	if n.cfg.Auto == nil || !n.primary.Load() {
		return nil
	}
	return n.cfg.Auto.lease.Lost()
}

// StartFor is StartNode for the exchange: nil when cfg.Mode is off (or
// empty), else the node with its metrics registered in reg.
func StartFor(ctx context.Context, cfg NodeConfig, pl *journal.Pipeline, reg prometheus.Registerer, log *slog.Logger) (*Node, error) {
	if cfg.Mode == ModeOff || cfg.Mode == "" {
		return nil, nil
	}
	cfg.Logger = log
	n, err := StartNode(ctx, cfg, pl)
	if err != nil {
		return nil, err
	}
	for _, c := range n.Collectors() {
		if err := reg.Register(c); err != nil {
			n.Close()
			return nil, fmt.Errorf("replication: metrics: %w", err)
		}
	}
	return n, nil
}

// run runs loop until the node closes, recording why it stopped.
func (n *Node) run(loop func(ctx context.Context) error) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := loop(n.ctx); err != nil && n.ctx.Err() == nil {
			n.failed.Store(&err)
			logging.Critical(n.ctx, n.cfg.Logger, "replication: the node stopped following or writing the log", "err", err)
			if diverged(err) {
				n.cancel() // a diverged standby applies nothing more
			}
		}
	}()
}

// promote claims the log and starts writing it.
func (n *Node) promote(ctx context.Context) error {
	t0 := time.Now()
	n.cfg.Logger.Info("replication: promoting: reading the log to its end, then claiming it", "seq", n.pl.DurableSeq())
	epoch, err := n.standby.Promote(ctx, n.cfg.Mode == ModeSync)
	n.cfg.Logger.Info("replication: promotion done", "took", time.Since(t0), "err", err)
	if err != nil {
		return err
	}
	if n.cfg.Mode == ModeAsync {
		n.async = NewAsync(n.log, n.pl)
		n.run(n.async.Run)
	}
	n.primary.Store(true)
	n.cfg.Logger.Info("replication: primary", "epoch", epoch, "mode", n.cfg.Mode, "seq", n.standby.submitted.Load())
	return nil
}

// Promote makes a standby the primary (POST /admin/v1/replication/promote)
// and returns its epoch; Promoted is closed then. Under automatic failover
// only the lease's holder is promoted (ErrLeaseLost otherwise): an
// operator's promotion of another node would fence the holder, which no
// other node could then replace.
//
// A promotion the log does not answer (a stream electing its leader, a
// quorum just back: "JetStream system temporarily unavailable") is tried
// again every 250 ms until ctx ends; an error that trying again cannot
// mend (retryable) is returned at once.
//
// A promotion by an operator that fails leaves the node a standby that
// follows the log again (its reads stay current; promoting again
// completes a claim whose answer was lost).
func (n *Node) Promote(ctx context.Context) (uint64, error) {
	epoch, err := n.promoteWhile(ctx, func() bool { return true })
	if err != nil && n.cfg.Auto == nil && n.ctx.Err() == nil && !n.primary.Load() &&
		!errors.Is(err, errSwitched) && !diverged(err) && n.standby.resume() {
		n.cfg.Logger.Warn("replication: promotion not completed; following the log again", "err", err)
		n.run(n.standby.Run)
	}
	return epoch, err
}

// promoteWhile promotes the node, trying again while the error is
// retryable, ctx lives and more holds. (Promoting is safe to repeat: a
// claim whose answer was lost is found as this node's own, and the log is
// read on from where the failed attempt stopped.)
//
// A node that closes (the process stopping) ends the promotion at once,
// whatever ctx allows: it must not claim the log on its way out.
func (n *Node) promoteWhile(ctx context.Context, more func() bool) (uint64, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(n.ctx, stop)()
	epoch, err := n.promoteOnce(ctx)
	cause := err // the last error that is not ctx's own ending
	for tries := 1; err != nil && retryable(err) && ctx.Err() == nil && more(); tries++ {
		if tries%10 == 1 {
			n.cfg.Logger.Warn("replication: promoting: the log does not answer yet; trying again", "err", err, "tries", tries)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
		if epoch, err = n.promoteOnce(ctx); err != nil && ctx.Err() == nil {
			cause = err
		}
	}
	switch {
	case err == nil:
		return epoch, nil
	case n.ctx.Err() != nil:
		return 0, fmt.Errorf("%w (promotion abandoned: %w)", ErrNodeClosed, cause)
	case ctx.Err() != nil && cause != err:
		return 0, fmt.Errorf("%w (the log did not answer: %w)", ctx.Err(), cause)
	}
	return 0, err
}

// ErrNodeClosed: the node is closing (the process stops); it promotes
// nothing more.
var ErrNodeClosed = errors.New("replication: the node is closing")

// promoteOnce is one attempt of Promote.
func (n *Node) promoteOnce(ctx context.Context) (uint64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return 0, ErrNodeClosed
	}
	if err := n.Err(); err != nil && diverged(err) { // as takeOver: a diverged node is never the primary
		return 0, fmt.Errorf("replication: not promoting a node stopped for an operator: %w", err)
	}
	if n.primary.Load() {
		return 0, ErrAlreadyPrimary
	}
	if f := n.cfg.Auto; f != nil && !f.lease.Held() {
		return 0, fmt.Errorf("%w: with --failover auto the holder of the lease is the primary", ErrLeaseLost)
	}
	if err := n.promote(ctx); err != nil {
		return 0, err
	}
	close(n.promoted)
	return n.log.Epoch(), nil
}

// Promoted is closed once a standby has been promoted: the process starts
// the primary's services (the sink, the publisher, the transfer service,
// the timers), which a standby does not run.
func (n *Node) Promoted() <-chan struct{} { return n.promoted }

// stop ends a standby's following after a divergence found off its loop.
func (n *Node) stop(err error) {
	if n.failed.CompareAndSwap(nil, &err) {
		logging.Critical(n.ctx, n.cfg.Logger, "replication: the standby's state DIVERGES from the primary's; it applies the log no more", "err", err)
	}
	n.cancel()
}

// PrimaryAddr is the primary's advertised address ("" if unknown): the part
// after "@" of its node name. A fenced node reads the newest epoch marker
// once to learn who fenced it.
func (n *Node) PrimaryAddr() string {
	w := n.standby.Writer()
	if n.primary.Load() {
		w = n.log.cfg.Node
		if n.log.Fenced() {
			w = n.fencedBy()
		}
	}
	if i := strings.LastIndexByte(w, '@'); i >= 0 {
		return w[i+1:]
	}
	return ""
}

// fencedBy is the node that claimed the log after this one ("" until known).
func (n *Node) fencedBy() string {
	if w := n.newWriter.Load(); w != nil {
		return *w
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	e, err := n.log.LastEpoch(ctx)
	if err != nil || e == nil || e.Node == n.log.cfg.Node {
		return ""
	}
	n.newWriter.Store(&e.Node)
	return e.Node
}

// Seq is the last command this node's state holds (its read view).
func (n *Node) Seq() uint64 { return uint64(n.pl.ViewSeq()) }

// ReplicationStatus is Status for GET /admin/v1/replication.
func (n *Node) ReplicationStatus() any { return n.Status() }

// Primary tells whether this node is the primary and may sequence
// commands (a fenced primary is not).
func (n *Node) Primary() bool { return n.primary.Load() && !n.log.Fenced() }

// StallLimit is how long the log may leave appends unconfirmed before the
// primary refuses new writes (503 REPLICATION_UNAVAILABLE) instead of
// letting them wait for a quorum.
const StallLimit = time.Second

// Accepting tells whether the primary takes new writes: the log confirms
// its appends (within StallLimit). Writes already sent wait for the
// quorum; none is acknowledged before the log holds it.
func (n *Node) Accepting() bool { return n.Primary() && n.log.Stalled() < StallLimit }

// Err is why the node's loop stopped (nil: running).
func (n *Node) Err() error {
	if p := n.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Status is the node's replication state (GET /health, metrics).
type Status struct {
	Role      Role     `json:"role"`
	Mode      Mode     `json:"mode"`
	Epoch     uint64   `json:"epoch"`
	Fenced    bool     `json:"fenced"`
	StreamSeq uint64   `json:"stream_seq"`   // the last record this node read or wrote
	Seq       core.Seq `json:"seq"`          // the last command in the log by this node's knowledge
	LagCmds   uint64   `json:"lag_commands"` // primary: durable commands the log lacks (async); standby: log commands not yet durable here
	LagSecs   float64  `json:"lag_seconds"`
	Primary   string   `json:"primary,omitempty"` // the writer's name@address, from its epoch marker
	Diverged  bool     `json:"diverged"`          // a state hash differed from the primary's: stopped
	HashesOK  uint64   `json:"hash_checks"`       // the primary's state hashes compared equal
	Failover  string   `json:"failover"`          // manual or auto
	LeaseHeld bool     `json:"lease_held"`        // auto: this node holds the primary's lease now
}

// Status reads the node's state.
func (n *Node) Status() Status {
	s := Status{Role: RoleStandby, Mode: n.cfg.Mode, Epoch: n.standby.Epoch(), Fenced: n.log.Fenced(),
		StreamSeq: n.standby.StreamSeq(), Primary: n.standby.Writer(), Diverged: n.hashes.diverged.Load() != nil,
		HashesOK: n.hashes.compared.Load(), Failover: FailoverManual}
	if n.cfg.Auto != nil {
		s.Failover, s.LeaseHeld = FailoverAuto, n.cfg.Auto.lease.Held()
	}
	seq, t := n.standby.Submitted()
	s.Seq = seq
	if n.primary.Load() {
		s.Role, s.Epoch, s.StreamSeq, s.Primary = RolePrimary, n.log.Epoch(), n.log.streamSq.Load(), n.log.cfg.Node
		s.Seq = n.log.Appended()
		if n.async != nil {
			s.LagCmds = n.async.Lag()
		}
		return s
	}
	if d := n.pl.DurableSeq(); n.standby.Pending() > 0 || d < seq {
		s.LagCmds = uint64(max(seq, d) - d)
		if s.LagCmds == 0 {
			s.LagCmds = n.standby.Pending() // records, at least one command each
		}
		if t > 0 {
			s.LagSecs = max(0, time.Since(time.Unix(0, t)).Seconds())
		}
	}
	return s
}

// Close stops the node's loop and closes the log.
func (n *Node) Close() {
	n.pl.SetStateHashHook(0, nil)
	n.cancel()
	n.wg.Wait()
	n.log.Close()
}

// Collectors are the node's ubs_replication_* metrics.
func (n *Node) Collectors() []prometheus.Collector {
	g := func(name, help string, f func(Status) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ubs_replication_" + name, Help: help},
			func() float64 { return f(n.Status()) })
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	cs := []prometheus.Collector{
		g("primary", "1 if this node is the primary (writes the log), 0 if a standby", func(s Status) float64 { return b(s.Role == RolePrimary) }),
		g("epoch", "the writer epoch this node knows (its own as the primary)", func(s Status) float64 { return float64(s.Epoch) }),
		g("appended_seq", "the last command in the replicated log by this node's knowledge", func(s Status) float64 { return float64(s.Seq) }),
		g("stream_seq", "the last record of the log this node wrote or read", func(s Status) float64 { return float64(s.StreamSeq) }),
		g("lag_commands", "primary (async): durable commands the log lacks; standby: log commands not yet durable here", func(s Status) float64 { return float64(s.LagCmds) }),
		g("lag_seconds", "standby: age of the last applied command while behind", func(s Status) float64 { return s.LagSecs }),
		g("fenced", "1 once another node appended to the log after this node: it acknowledges nothing more", func(s Status) float64 { return b(s.Fenced) }),
		g("diverged", "1 once this standby's state hash differed from the primary's at the same seq: it stopped applying the log", func(s Status) float64 { return b(s.Diverged) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ubs_replication_hash_checks_total",
			Help: "state hashes of the primary this standby compared equal to its own at the same seq"}, func() float64 { return float64(n.hashes.compared.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ubs_replication_fenced_appends_total",
			Help: "this node's appends refused because another node had appended"}, func() float64 { return float64(n.log.Refused()) }),
	}
	if f := n.cfg.Auto; f != nil {
		c := func(name, help string, v *atomic.Uint64) prometheus.Collector {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ubs_replication_" + name, Help: help},
				func() float64 { return float64(v.Load()) })
		}
		cs = append(cs,
			g("lease_held", "1 while this node holds the primary's lease (automatic failover)", func(s Status) float64 { return b(s.LeaseHeld) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ubs_replication_lease_acquisitions_total",
				Help: "times this process acquired the primary's lease"}, func() float64 { return float64(f.lease.Acquisitions()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ubs_replication_lease_max_renewal_seconds",
				Help: "the slowest successful lease renewal so far (the TTL must stay well above it)"}, func() float64 { return f.lease.MaxRenewal().Seconds() }),
			c("takeovers_total", "standbys of this process promoted after winning the lease", &f.takeovers),
			c("rejoins_total", "starts as a standby that discarded this node's unreplicated WAL tail", &f.rejoins),
			c("bootstraps_total", "data dirs started from the newest snapshot of the bucket", &f.bootstraps),
			c("set_aside_total", "journals set aside because they shared no entry with the log", &f.asides))
	}
	return cs
}
