package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal/ring"
)

// Named limits and defaults of the pipeline.
const (
	DefaultRingSize      = 1 << 12 // commands in flight between submit and reply: bounds queueing latency (4096 at ~1M/s is ~4 ms)
	DefaultMaxBatch      = 8192    // commands per WriteBatch + fsync (group commit)
	DefaultGatherYields  = 8       // yields the journaler makes while a group commit keeps growing (see gather)
	DefaultSnapshotEvery = 1_000_000
	DefaultKeepSnapshots = 2
)

// ErrBusy is returned by TrySubmit when the ring is full: the caller answers
// 503 rather than queueing without bound.
var ErrBusy = errors.New("journal: pipeline busy")

// ErrInvalidKind is returned by Submit and TrySubmit for a command whose Kind
// the WAL codec cannot replay: it is refused before it gets a seq, so it can
// never be journaled and then block recovery.
var ErrInvalidKind = errors.New("journal: invalid command kind")

// ErrStopped is returned once the pipeline is closed or has failed.
var ErrStopped = errors.New("journal: pipeline stopped")

// ErrBatchSize is returned by SubmitBatch and SubmitFunc for an empty batch
// or one larger than the ring.
var ErrBatchSize = errors.New("journal: batch size out of range")

// ErrNoReadView is returned by Read when Config.ReadView is off.
var ErrNoReadView = errors.New("journal: no read view configured")

// Config configures a Pipeline.
type Config struct {
	Dir           string
	RingSize      int    // power of two; DefaultRingSize if 0
	MaxBatch      int    // DefaultMaxBatch if 0
	GatherYields  int    // at most this many yields to let a group commit grow (gather); DefaultGatherYields if 0, none if < 0
	SnapshotEvery uint64 // commands between periodic snapshots; DefaultSnapshotEvery if 0
	KeepSnapshots int    // DefaultKeepSnapshots if 0
	SegmentSize   int    // WAL segment size; the WAL default if 0
	NoSync        bool   // tests and benchmarks of the non-durable path only
	// NoSnapshots runs no state follower (state.go): no periodic snapshot,
	// no CheckOnState, no StateHashAt; the poison-rebuild base stays the
	// start's state. Benchmarks' baseline only ("snapshots off").
	NoSnapshots bool
	// MeasureApply times every command on the processor (MaxApply): a
	// benchmark's measure of the processor's longest pause, from seq
	// MeasureApplyFrom on (a benchmark's warm-up and setup excluded, as
	// from its latency histogram).
	MeasureApply     bool
	MeasureApplyFrom core.Seq
	// RealtimeProcessor runs the processor goroutine on an OS thread of
	// its own at real-time priority (SCHED_FIFO 1, Linux; realtimeThread),
	// so that no thread of the normal class takes its core while it
	// applies a command. Without it the processor's longest pause in a
	// run is usually a scheduler tick (3-5 ms on the 2-core VM: another
	// runnable thread kept the core); with it the median over the same
	// 13 runs was 0.6 ms (0.2 ms over 23), not bounded
	// (docs/state-at-scale.md, "The processor at real-time priority").
	// It needs CAP_SYS_NICE (or RLIMIT_RTPRIO >= 1);
	// refused, the pipeline logs a warning and runs as without it.
	// Off by default: the processor then never starves the other threads
	// of its core, and on 2 cores with the state follower on the
	// acknowledgements were slower with it (the thread lock's cost).
	RealtimeProcessor bool
	Core              core.Config
	Logger            *slog.Logger
	// Now returns unix nanoseconds; time.Now by default. Called once per
	// command at sequencing.
	Now func() int64
	// OnAck, if set, is called for every command once it is durable and
	// applied (and, with ReadView, in the view), in seq order, never
	// concurrently: on the journaler, processor or viewer goroutine,
	// whichever completed the command last. It must not block (it delays
	// the group commit or the processor).
	OnAck func(s *Slot)
	// TruncateLimit, if set, returns the seq a downstream consumer (the
	// Postgres sink) has persisted: the newest snapshot at or below it and
	// the WAL after that snapshot are kept, so the consumer can re-derive
	// its events from there (with no such snapshot, the whole WAL is kept).
	// 0 means "not known yet": nothing is pruned or truncated.
	TruncateLimit func() core.Seq
	// OnJournalBatch, if set, is called on the journaler goroutine after
	// every group commit with the batch size and the time of its write +
	// fsync (metrics). It must not block.
	OnJournalBatch func(n int, d time.Duration)
	// ReadView enables Read: a read replica of the core state, kept by its
	// own goroutine that re-applies every command after the processor, so
	// readers never touch (or stall) the processor's state.
	ReadView bool
	// OnView, if set (with ReadView), is called on the view goroutine for
	// every command and its events, in seq order, while the view's write
	// lock is held: state derived from events and read inside Read stays
	// consistent with the replica. It must not block or keep evs.
	OnView func(c *core.Command, evs []core.Event)
	// Replicator, if set, is the replicated log of sync replication
	// (replicate.go): a command is durable only once the local fsync and
	// the log have both stored it.
	Replicator Replicator
	// Standby starts the pipeline as a standby: it applies only the
	// commands SubmitSequenced gives it (a primary's, from the replicated
	// log) and refuses Submit with ErrStandby, until Promote.
	Standby bool
	// WarmUp, if set, runs during Start once recovery is done, in
	// parallel with the restores of the replicas (start-up time at
	// scale), and Start waits for it: a consumer's own replay of the WAL
	// up to the recovered seq (pl.Recovery().Seq; the exchange's order
	// history). It may use pl.Recovery, NewFollower, DurableSeq (the
	// recovered seq) and read pl.Processor (the recovered state), nothing
	// else: no command runs and no OnView is called before it returns. Its
	// error fails Start.
	WarmUp func(pl *Pipeline) error
}

// Slot is one ring entry. The submitter writes Cmd, Reply and Enq; the
// processor writes Result; release reads them. A Slot is reused once it has
// been released.
type Slot struct {
	Cmd    core.Command
	Reply  *Reply     // nil if nobody waits for this command
	Enq    int64      // submitter's monotonic clock at submit, ns (latency metrics)
	Result core.Event // the command's EvResult, set by the processor
	// Discard, set by the processor, is why the command was discarded
	// instead of applied (nil: applied); the read view discards it the same way.
	Discard *core.Rollback
}

// Reply receives a command's events. The processor fills Events on its own
// goroutine; release signals Done only once the command is durable, so
// the caller may read Events after Done (never before).
type Reply struct {
	Events []core.Event // all events of the command; the last is EvResult (only it with ResultOnly)
	// ResultOnly, set before the Reply is submitted, keeps the command's
	// other events out of Events: a caller that needs only the outcome of
	// a command with thousands of events (a p2p tick) does not have them
	// copied on the processor goroutine.
	ResultOnly bool
	done       chan struct{}
}

// NewReply returns a reusable Reply.
func NewReply() *Reply { return &Reply{done: make(chan struct{}, 1)} }

// Result is the command's EvResult (valid after a successful Wait; the zero
// Event if there is none). A Reply whose Wait failed must not be reused.
func (r *Reply) Result() core.Event {
	if len(r.Events) == 0 {
		return core.Event{}
	}
	return r.Events[len(r.Events)-1]
}

// Pipeline is ring -> {journaler, processor} -> release around one
// core.Processor, plus a snapshot writer. See the package doc.
type Pipeline struct {
	cfg   Config
	log   *slog.Logger
	ring  *ring.Ring[Slot]
	jst   *ring.Stage[Slot] // journaler
	pst   *ring.Stage[Slot] // processor
	vst   *ring.Stage[Slot] // read view (nil without Config.ReadView)
	rst   *ring.Stage[Slot] // release (driven by the relBusy holder, no goroutine of its own)
	base  core.Seq          // core seq = base + ring seq
	wal   *WAL
	snaps *SnapshotStore

	proc     *core.Processor            // owned by the processor goroutine after Start
	baseSnap atomic.Pointer[[]byte]     // serialized state at the last snapshot (or at start): the poison-rebuild base; written by the state follower
	poisoned map[core.Seq]core.Rollback // commands discarded instead of applied; processor goroutine
	// rebuilding is set while the processor rebuilds after a discarded
	// command: the state follower then truncates no WAL (stages.go discard).
	rebuilding atomic.Bool

	recovery   RecoveryReport // what the start-up recovery found; immutable after Start
	evictions  atomic.Uint64  // commands discarded since start (poison, failed checks): each rebuilt the state
	recoveries atomic.Uint64  // state rebuilds since start: the start-up recovery, then one per discard

	// The read view: a replica processor owned by the viewer goroutine;
	// readers hold viewMu.RLock, the viewer holds viewMu.Lock while applying.
	view    *core.Processor
	viewMu  sync.RWMutex
	viewSeq core.Seq // seq the view reflects; guarded by viewMu

	durable atomic.Uint64 // highest seq fsynced in the WAL
	jDone   atomic.Bool   // the journaler has stopped: durable will not grow
	durWait waiter        // woken when durable grows or the journaler stops
	applied atomic.Uint64 // highest seq applied by the processor
	acked   atomic.Uint64 // highest seq released
	// release's hand-over: relBusy is held by the one goroutine releasing;
	// relPending asks it for another pass; relNext (the next ring seq to
	// release) and rst's view belong to the relBusy holder.
	relBusy    atomic.Bool
	relPending atomic.Bool
	relNext    int64
	failed     atomic.Pointer[error]
	dead       chan struct{} // closed when the pipeline stops (close or failure)
	deadOnce   sync.Once

	// The state follower (state.go): a replica of its own that writes the
	// snapshots and answers checks and state hashes off the processor.
	stateReqs  chan stateReq
	stateStop  context.CancelFunc
	stateCtx   context.Context
	snapDoneCh chan struct{} // closed when the state follower exits
	lastSnap   core.Seq      // the state follower's; read by Close after snapDoneCh
	// snapRetryAt: after a failed snapshot write, the seq before which the
	// follower does not try a periodic one again (the state follower's).
	snapRetryAt core.Seq
	state       stateStats
	maxApply    atomic.Int64 // ns, with Config.MeasureApply
	rtTID       atomic.Int64 // the processor's thread while it runs at real-time priority (Config.RealtimeProcessor); 0 otherwise
	wg          sync.WaitGroup
	closeOnce   sync.Once

	repState      // sync replication and the standby mode (replicate.go)
	stateHashHook // the state follower's periodic hashes (state.go)
}

// Start recovers the state in cfg.Dir (snapshot + WAL replay + full invariant
// check) and starts the pipeline goroutines.
func Start(cfg Config) (*Pipeline, error) {
	if cfg.RingSize == 0 {
		cfg.RingSize = DefaultRingSize
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.GatherYields == 0 {
		cfg.GatherYields = DefaultGatherYields
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = DefaultSnapshotEvery
	}
	if cfg.KeepSnapshots == 0 {
		cfg.KeepSnapshots = DefaultKeepSnapshots
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	// A data dir that ever allowed faults replays them, and keeps applying
	// them, with or without the flag now (FaultsMarker).
	if cfg.Core.AllowFaults {
		if err := markFaults(cfg.Dir); err != nil {
			return nil, fmt.Errorf("journal: record that faults are allowed: %w", err)
		}
	} else if faultsMarked(cfg.Dir) {
		cfg.Core.AllowFaults = true
		cfg.Logger.Warn("journal: this data dir once allowed fault injection: its journaled faults replay as they were applied",
			"marker", filepath.Join(cfg.Dir, FaultsMarker))
	}
	rec, err := Recover(RecoverConfig{Dir: cfg.Dir, SegmentSize: cfg.SegmentSize, NoSync: cfg.NoSync,
		Core: cfg.Core, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	r, err := ring.New[Slot](cfg.RingSize)
	if err != nil {
		rec.WAL.Close()
		return nil, err
	}
	pl := &Pipeline{cfg: cfg, log: cfg.Logger, ring: r, wal: rec.WAL, snaps: rec.Snapshots,
		proc: rec.Proc, poisoned: rec.Poisoned, base: rec.Proc.LastSeq(), lastSnap: rec.SnapshotSeq,
		dead: make(chan struct{}), stateReqs: make(chan stateReq)}
	base := rec.State // serialized once, by the recovery (its state hash)
	rec.State = nil
	pl.baseSnap.Store(&base)
	pl.repCtx, pl.repCancel = context.WithCancel(context.Background())
	pl.standby.Store(cfg.Standby)
	if cfg.Replicator != nil {
		pl.rep.Store(&repBox{r: cfg.Replicator})
	}
	pl.durWait.init()
	pl.jst = r.NewStage()
	pl.pst = r.NewStage()
	durable := pl.jst // the stage after which a command is durable
	if cfg.Replicator != nil || cfg.Standby {
		pl.repst = r.NewStage(pl.jst)
		durable = pl.repst
	}
	// Recovery's outcome, before the replicas: WarmUp reads it.
	pl.recovery = RecoveryReport{Duration: rec.Duration, MarketCheck: rec.MarketCheck, Open: rec.Open,
		Contained: rec.Contained, Skipped: rec.Skipped, SnapshotSeq: rec.SnapshotSeq, Seq: rec.Proc.LastSeq()}
	pl.durable.Store(uint64(pl.base)) // the recovered state is on disk
	warmErr := make(chan error, 1)
	if cfg.WarmUp == nil {
		warmErr <- nil
	} else {
		go func() { warmErr <- cfg.WarmUp(pl) }()
	}
	// The state follower's replica is copied beside the read view's (two
	// copies of the recovered state, in parallel: start-up time at scale).
	// Copies (core.Processor.Clone), not restores of base: Clone only reads
	// rec.Proc, as the warm-up does beside them, and nothing applies a
	// command to it before the processor goroutine starts below.
	var sf *Follower
	sfDone := make(chan struct{})
	if cfg.NoSnapshots {
		close(sfDone)
	} else {
		go func() {
			defer close(sfDone)
			t := time.Now()
			sf = pl.newStateFollower(rec.Proc.Clone(), base)
			cfg.Logger.Info("journal: start: state follower's replica copied", "took", time.Since(t))
		}()
	}
	if cfg.ReadView {
		t := time.Now()
		pl.view, pl.viewSeq = rec.Proc.Clone(), pl.base
		cfg.Logger.Info("journal: start: read view's replica copied", "took", time.Since(t))
		pl.vst = r.NewStage(pl.pst)
		pl.rst = r.NewStage(durable, pl.vst)
	} else {
		pl.rst = r.NewStage(durable, pl.pst)
	}
	<-sfDone
	if err := <-warmErr; err != nil {
		rec.WAL.Close()
		return nil, err
	}
	pl.recoveries.Store(1)
	pl.applied.Store(uint64(pl.base))
	pl.acked.Store(uint64(pl.base))
	pl.relNext = 1
	pl.wg.Add(2)
	go pl.journaler()
	go pl.processor()
	if pl.repst != nil {
		pl.wg.Add(1)
		go pl.replicationStage()
	}
	if pl.vst != nil {
		pl.wg.Add(1)
		go pl.viewer()
	}
	pl.stateCtx, pl.stateStop = context.WithCancel(context.Background())
	pl.snapDoneCh = make(chan struct{})
	if sf == nil {
		close(pl.snapDoneCh)
	} else {
		go pl.stateFollower(sf)
	}
	if err := pl.tripRecovered(rec); err != nil {
		_ = pl.Close()
		return nil, err
	}
	return pl, nil
}

// DurableSeq is the highest seq known to be fsynced.
func (pl *Pipeline) DurableSeq() core.Seq { return core.Seq(pl.durable.Load()) }

// AppliedSeq is the highest seq applied by the processor (may run ahead of DurableSeq).
func (pl *Pipeline) AppliedSeq() core.Seq { return core.Seq(pl.applied.Load()) }

// AckedSeq is the highest seq whose result has been released.
func (pl *Pipeline) AckedSeq() core.Seq { return core.Seq(pl.acked.Load()) }

// Err is the error that stopped the pipeline, if any.
func (pl *Pipeline) Err() error {
	if e := pl.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// Dead is closed when the pipeline has stopped.
func (pl *Pipeline) Dead() <-chan struct{} { return pl.dead }

// Submit sequences c (stamping Seq and Time), waiting while the ring is full.
// If reply is non-nil it is signalled once c is durable and applied.
func (pl *Pipeline) Submit(c *core.Command, reply *Reply) (core.Seq, error) {
	if !c.Kind.Valid() {
		return 0, ErrInvalidKind
	}
	if err := pl.standbyCheck(); err != nil {
		return 0, err
	}
	lo, _, err := pl.ring.Claim(1)
	if err != nil {
		return 0, ErrStopped
	}
	return pl.fill(lo, c, reply), nil
}

// TrySubmit is Submit that answers ErrBusy instead of waiting on a full ring.
func (pl *Pipeline) TrySubmit(c *core.Command, reply *Reply) (core.Seq, error) {
	if !c.Kind.Valid() {
		return 0, ErrInvalidKind
	}
	if err := pl.standbyCheck(); err != nil {
		return 0, err
	}
	lo, _, ok := pl.ring.TryClaim(1)
	if !ok {
		if pl.ring.Closed() {
			return 0, ErrStopped
		}
		return 0, ErrBusy
	}
	return pl.fill(lo, c, reply), nil
}

func (pl *Pipeline) fill(lo int64, c *core.Command, reply *Reply) core.Seq {
	s := pl.ring.Slot(lo)
	seq := pl.base + core.Seq(lo)
	s.Cmd = *c
	s.Cmd.Seq = seq
	s.Cmd.Time = pl.cfg.Now()
	s.Reply = reply
	s.Enq = nanotime()
	pl.ring.Publish(lo, lo)
	return seq // not s.Cmd.Seq: once published, the slot may be released and reused at any time
}

// SubmitBatch sequences cmds as one contiguous range with a single publish
// (no replies; use Config.OnAck to observe them). It returns the first seq.
func (pl *Pipeline) SubmitBatch(cmds []core.Command) (core.Seq, error) {
	if len(cmds) == 0 || len(cmds) > pl.ring.Cap() {
		return 0, fmt.Errorf("%w: %d commands (1..%d)", ErrBatchSize, len(cmds), pl.ring.Cap())
	}
	for i := range cmds {
		if !cmds[i].Kind.Valid() {
			return 0, ErrInvalidKind
		}
	}
	if err := pl.standbyCheck(); err != nil {
		return 0, err
	}
	lo, hi, err := pl.ring.Claim(len(cmds))
	if err != nil {
		return 0, ErrStopped
	}
	now, enq := pl.cfg.Now(), nanotime()
	for i := lo; i <= hi; i++ {
		s := pl.ring.Slot(i)
		s.Cmd = cmds[i-lo]
		s.Cmd.Seq = pl.base + core.Seq(i)
		s.Cmd.Time = now
		s.Reply = nil
		s.Enq = enq
	}
	pl.ring.Publish(lo, hi)
	return pl.base + core.Seq(lo), nil
}

// Wait blocks until r is signalled or the pipeline stops.
func (pl *Pipeline) Wait(r *Reply) error {
	select {
	case <-r.done:
		return nil
	case <-pl.dead:
		select {
		case <-r.done:
			return nil
		default:
		}
		if err := pl.Err(); err != nil {
			return err
		}
		return ErrStopped
	}
}

// WaitContext is Wait that returns ctx.Err() if ctx ends first (r may
// still be signalled later: do not reuse it then).
func (pl *Pipeline) WaitContext(ctx context.Context, r *Reply) error {
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-pl.dead:
		return pl.Wait(r)
	}
}

func (pl *Pipeline) fail(err error) {
	pl.failed.CompareAndSwap(nil, &err)
	pl.log.Error("journal: pipeline failed", "err", err)
	pl.ring.Close()
	pl.deadOnce.Do(func() { close(pl.dead) })
}

// Close stops accepting commands, drains everything already submitted
// (journaled, applied, answered), writes a final snapshot and closes the WAL.
func (pl *Pipeline) Close() error {
	var err error
	pl.closeOnce.Do(func() {
		pl.ring.Close()
		grace := time.AfterFunc(replicateCloseGrace, pl.repCancel)
		pl.wg.Wait()
		grace.Stop()
		pl.repCancel()
		pl.stateStop()
		<-pl.snapDoneCh
		if pl.Err() == nil && pl.proc.LastSeq() > pl.lastSnap && pl.DurableSeq() >= pl.proc.LastSeq() {
			err = pl.snaps.Write(uint64(pl.proc.LastSeq()), pl.proc.AppendSnapshot(nil))
		}
		if cerr := pl.wal.Close(); err == nil {
			err = cerr
		}
		pl.deadOnce.Do(func() { close(pl.dead) })
		if err == nil {
			err = pl.Err()
		}
	})
	return err
}

// Processor returns the core processor. Only safe to use after Close, or
// to read during Config.WarmUp (the processor goroutine owns it while
// running).
func (pl *Pipeline) Processor() *core.Processor { return pl.proc }

func (pl *Pipeline) String() string {
	return fmt.Sprintf("pipeline{durable=%d applied=%d acked=%d}", pl.DurableSeq(), pl.AppliedSeq(), pl.AckedSeq())
}

// SubmitFunc claims n consecutive seqs and lets fill write each command
// knowing its seq (so a workload can be a deterministic function of seq even
// with many producers), then publishes them with one publish. Time is stamped
// after fill.
//
// A command fill leaves with an invalid Kind cannot be journaled: its seq is
// consumed by a no-op tick instead and SubmitFunc returns ErrInvalidKind
// (after publishing the whole range).
func (pl *Pipeline) SubmitFunc(n int, fill func(seq core.Seq, c *core.Command)) (core.Seq, error) {
	if n < 1 || n > pl.ring.Cap() {
		return 0, fmt.Errorf("%w: %d commands (1..%d)", ErrBatchSize, n, pl.ring.Cap())
	}
	if err := pl.standbyCheck(); err != nil {
		return 0, err
	}
	lo, hi, err := pl.ring.Claim(n)
	if err != nil {
		return 0, ErrStopped
	}
	now, enq := pl.cfg.Now(), nanotime()
	var bad error
	for i := lo; i <= hi; i++ {
		s := pl.ring.Slot(i)
		seq := pl.base + core.Seq(i)
		s.Cmd = core.Command{}
		fill(seq, &s.Cmd)
		if !s.Cmd.Kind.Valid() {
			s.Cmd = core.Command{Kind: core.KindTick}
			bad = ErrInvalidKind
		}
		s.Cmd.Seq, s.Cmd.Time = seq, now
		s.Reply = nil
		s.Enq = enq
	}
	pl.ring.Publish(lo, hi)
	return pl.base + core.Seq(lo), bad
}

// Read runs fn on the read view (Config.ReadView) under its read lock: a
// replica of the core state that includes every command already answered
// to anyone. Read returns only once the seq the view reflected is durable,
// so nothing fn saw can be lost in a crash; it returns ErrStopped if the
// pipeline stops first. fn must only query p and must not keep references
// into it. Read never blocks the processor (only the viewer, for the time
// fn runs).
func (pl *Pipeline) Read(fn func(p *core.Processor) error) error {
	if pl.view == nil {
		return ErrNoReadView
	}
	seq, err := pl.readView(fn)
	if err != nil {
		return err
	}
	return pl.waitDurable(seq)
}

// readView runs fn under the view's read lock (released even if fn panics).
func (pl *Pipeline) readView(fn func(p *core.Processor) error) (core.Seq, error) {
	pl.viewMu.RLock()
	defer pl.viewMu.RUnlock()
	return pl.viewSeq, fn(pl.view)
}

// waitDurable blocks until seq is durable; ErrStopped if the journaler has
// stopped (or failed) below it.
func (pl *Pipeline) waitDurable(seq core.Seq) error {
	ok := func() bool { return pl.DurableSeq() >= seq || pl.jDone.Load() }
	if !ok() {
		pl.durWait.wait(ok)
	}
	if pl.DurableSeq() >= seq {
		return nil
	}
	if err := pl.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrStopped, err)
	}
	return ErrStopped
}

// waiter is a condition variable for atomically published state: wait
// registers, re-checks and sleeps under mu; notify (after the state change
// is stored) only takes mu when somebody sleeps. Sequentially consistent
// atomics make a lost wake-up impossible: either the waiter's re-check sees
// the change or notify sees waiters > 0 and broadcasts once it gets mu,
// which is only after the waiter sleeps.
type waiter struct {
	mu      sync.Mutex
	cond    sync.Cond
	waiters atomic.Int32  // sleepers in wait, plus 1 while ch is set
	ch      chan struct{} // closed by the next notify; set by changed (under mu)
}

func (w *waiter) init() { w.cond.L = &w.mu }

func (w *waiter) wait(ok func() bool) {
	w.mu.Lock()
	w.waiters.Add(1)
	for !ok() {
		w.cond.Wait()
	}
	w.waiters.Add(-1)
	w.mu.Unlock()
}

// changed returns a channel that the next notify closes, for a waiter that
// must also watch something else (a context). Like wait, the caller
// registers first and only then re-checks its condition: a change stored
// before the re-check is seen by it, one stored after it closes the channel.
func (w *waiter) changed() <-chan struct{} {
	w.mu.Lock()
	if w.ch == nil {
		w.ch = make(chan struct{})
		w.waiters.Add(1)
	}
	ch := w.ch
	w.mu.Unlock()
	return ch
}

func (w *waiter) notify() {
	if w.waiters.Load() > 0 {
		w.mu.Lock()
		w.cond.Broadcast()
		if w.ch != nil {
			close(w.ch)
			w.ch = nil
			w.waiters.Add(-1)
		}
		w.mu.Unlock()
	}
}

// InFlight is the number of commands sequenced but not yet answered (the
// ring's depth).
func (pl *Pipeline) InFlight() int64 {
	return pl.ring.Claimed() - int64(pl.acked.Load()-uint64(pl.base))
}
