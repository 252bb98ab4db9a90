package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// Applier is the standby's own pipeline (journal.Pipeline with
// Config.Standby): it journals, applies and serves the primary's commands.
type Applier interface {
	SubmitSequenced(cmds []core.Command) error
	DurableSeq() core.Seq
	Promote(rep journal.Replicator)
	TripDeferred(ctx context.Context) error // after Promote: what the recovery found open as a standby
	IterateWAL(from core.Seq, fn func(seq core.Seq, payload []byte) error) error
}

// ErrDiverged: this node's WAL holds commands the log does not (an
// unreplicated tail of a fenced primary, while another node appended other
// commands at the same seqs). It must not apply the log on top of them.
var ErrDiverged = errors.New("replication: this node's WAL diverges from the log")

// ErrOtherVenue: the log belongs to another venue than this node's data.
var ErrOtherVenue = errors.New("replication: the log belongs to another venue")

// Standby follows the replicated log and applies every command of it to its
// own pipeline, in order, exactly once (commands its WAL already holds are
// skipped), until Promote makes it the writer.
type Standby struct {
	log *Log
	pl  Applier

	mu     sync.Mutex
	cancel context.CancelFunc // stops the running follow (nil: none)
	done   chan struct{}      // closed when it has stopped

	// Progress, for metrics and promotion; written by the follow loop.
	streamSeq atomic.Uint64          // the last record read
	epoch     atomic.Uint64          // the newest epoch seen
	submitted atomic.Uint64          // the last command handed to the pipeline
	lastTime  atomic.Int64           // that command's Time (unix ns)
	writer    atomic.Pointer[string] // the node of the newest epoch marker read
	promoted  atomic.Bool            // Promote called: Run follows no more (until resume)
	switched  atomic.Bool            // the pipeline was made the primary's: never a standby again
	// adopt, if set, makes the node's data dir take the venue of an epoch
	// marker (its WAL id), or refuses a log of another venue.
	adopt func(venue string) error
	// hashes, if set, compares the log's state hashes with this node's.
	hashes *hashCheck
	// lease, under automatic failover: the primary's replicator is then
	// LeasedReplicator, which acknowledges nothing once it is not held.
	lease interface{ Held() bool }
	// createVenue, if set, gives the data dir a venue of its own when this
	// node claims a log that names none.
	createVenue func() (string, error)
}

// NewStandby returns a standby applying log to pl.
func NewStandby(log *Log, pl Applier) *Standby {
	s := &Standby{log: log, pl: pl}
	s.submitted.Store(uint64(pl.DurableSeq()))
	return s
}

// StreamSeq is the last record the standby has read.
func (s *Standby) StreamSeq() uint64 { return s.streamSeq.Load() }

// Epoch is the newest writer epoch the standby has seen.
func (s *Standby) Epoch() uint64 { return s.epoch.Load() }

// Writer is the node name of the newest epoch marker read ("" if none):
// the primary's, as "<id>@<address>" when it advertises one.
func (s *Standby) Writer() string {
	if w := s.writer.Load(); w != nil {
		return *w
	}
	return ""
}

// Pending is how many records of the log the standby has not read yet (as
// the server last said).
func (s *Standby) Pending() uint64 { return s.log.pending.Load() }

// Submitted is the last command handed to the pipeline, and its Time.
func (s *Standby) Submitted() (core.Seq, int64) {
	return core.Seq(s.submitted.Load()), s.lastTime.Load()
}

// Run follows the log until ctx ends, Promote is called, or an error (a
// record out of order, the pipeline stopped). Call it once, and again
// only after resume.
func (s *Standby) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	if s.promoted.Load() {
		s.mu.Unlock()
		cancel()
		return nil
	}
	s.cancel, s.done = cancel, make(chan struct{})
	s.mu.Unlock()
	defer close(s.done)
	defer cancel()
	if err := s.position(ctx); err != nil {
		return err
	}
	err := s.follow(ctx, s.streamSeq.Load()+1, 0)
	if s.promoted.Load() && ctx.Err() != nil {
		return nil
	}
	return err
}

// resume makes a standby whose promotion failed before its pipeline
// became the primary's a standby again, for Run to follow the log from
// where it stopped. It reports false if the pipeline is the primary's.
func (s *Standby) resume() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.switched.Load() {
		return false
	}
	s.promoted.Store(false)
	return true
}

// position finds, once, where in the log this node's WAL ends (Seek) and
// the newest epoch marker, which may precede it.
func (s *Standby) position(ctx context.Context) error {
	if s.streamSeq.Load() != 0 {
		return nil
	}
	from, err := s.log.Seek(ctx, core.Seq(s.submitted.Load())+1)
	if err != nil {
		return err
	}
	e, err := s.log.LastEpoch(ctx)
	if err != nil {
		return err
	}
	if e != nil {
		if err := s.checkVenue(*e); err != nil {
			return err
		}
		s.noteEpoch(*e)
	}
	s.streamSeq.Store(from - 1)
	return nil
}

// errCaughtUp ends follow at its target.
var errCaughtUp = errors.New("caught up")

// follow applies the records from stream sequence from on; with to > 0 it
// returns nil once record to is applied.
func (s *Standby) follow(ctx context.Context, from, to uint64) error {
	if to > 0 && from > to {
		return nil
	}
	var cmds []core.Command
	err := s.log.Follow(ctx, from, func(sq uint64, r Record) error {
		if err := s.apply(r, &cmds); err != nil {
			return err
		}
		s.streamSeq.Store(sq)
		if to > 0 && sq >= to {
			return errCaughtUp
		}
		return nil
	})
	if errors.Is(err, errCaughtUp) {
		return nil
	}
	return err
}

// apply hands a record's new commands to the pipeline.
func (s *Standby) apply(r Record, buf *[]core.Command) error {
	if err := s.checkVenue(r); err != nil {
		return err
	}
	s.noteEpoch(r)
	if r.Kind == KindHash && s.hashes != nil {
		return s.hashes.compare(r.Seq, r.Hash, false)
	}
	if r.Kind != KindCommands {
		return nil
	}
	have := core.Seq(s.submitted.Load())
	if r.Seq > have+1 {
		return fmt.Errorf("%w: the log skips from command %d to %d", ErrRecord, have, r.Seq)
	}
	if err := s.checkOverlap(r, have); err != nil {
		return err
	}
	cmds := (*buf)[:0]
	for i, b := range r.Commands {
		seq := r.Seq + core.Seq(i)
		if seq <= have {
			continue // already in this node's WAL
		}
		var c core.Command
		if err := core.DecodeCommand(b, &c); err != nil {
			return fmt.Errorf("%w: command %d: %w", ErrRecord, seq, err)
		}
		if c.Seq != seq {
			return fmt.Errorf("%w: the record of command %d holds command %d", ErrRecord, seq, c.Seq)
		}
		cmds = append(cmds, c)
	}
	*buf = cmds
	if len(cmds) == 0 {
		return nil
	}
	if err := s.pl.SubmitSequenced(cmds); err != nil {
		return err
	}
	last := cmds[len(cmds)-1]
	s.submitted.Store(uint64(last.Seq))
	s.lastTime.Store(last.Time)
	return nil
}

// checkVenue adopts an epoch marker's venue or refuses the log; an adopted
// venue is the one this node's own claims carry.
func (s *Standby) checkVenue(r Record) error {
	if r.Kind != KindEpoch || r.Venue == "" || s.adopt == nil {
		return nil
	}
	if err := s.adopt(r.Venue); err != nil {
		return fmt.Errorf("%w: %v", ErrOtherVenue, err)
	}
	s.log.setVenue(r.Venue)
	return nil
}

// noteEpoch records the newest epoch and its writer.
func (s *Standby) noteEpoch(r Record) {
	if r.Epoch > s.epoch.Load() {
		s.epoch.Store(r.Epoch)
	}
	if r.Kind == KindEpoch && r.Epoch >= s.epoch.Load() {
		node := r.Node
		s.writer.Store(&node)
	}
}

// errStop ends a WAL iteration early.
var errStop = errors.New("stop")

// checkOverlap compares the commands of r that this node's WAL already
// holds (after a restart) with the log's: they must be the same bytes.
func (s *Standby) checkOverlap(r Record, have core.Seq) error {
	to := min(r.Last(), have)
	if r.Seq > to {
		return nil
	}
	err := s.pl.IterateWAL(r.Seq, func(seq core.Seq, p []byte) error {
		if seq > to {
			return errStop
		}
		if !bytes.Equal(p, r.Commands[seq-r.Seq]) {
			return fmt.Errorf("%w: command %d differs (log epoch %d)", ErrDiverged, seq, r.Epoch)
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// appendTail stores the commands after the log's last one that this node's
// WAL holds (written locally, never acknowledged: the primary stopped
// before the log stored them), so the log has every command of the node
// that now writes it.
func (s *Standby) appendTail(ctx context.Context, logLast core.Seq) error {
	for next, to := logLast+1, core.Seq(s.submitted.Load()); next <= to; {
		last, err := appendWAL(ctx, s.log, s.pl, next, to)
		if err != nil {
			return err
		}
		next = last + 1
	}
	return nil
}

// catchUpDirect: a promotion reads a range of the log shorter than this
// record by record (catchUp), a longer one with an ordered consumer.
const catchUpDirect = 4096

// catchUp applies the records from stream sequence from to to, each read
// directly by its sequence with a bounded request. A promotion reads a
// known range, usually short, and must not depend on creating a consumer:
// while the stream elects a leader (its leader's host died with the
// primary) that failed again and again, 10 s each, and one take-over spent
// 75 s reading 680 records. A failed read ends the promotion's attempt,
// which its caller repeats (promoteWhile) from where this one stopped.
func (s *Standby) catchUp(ctx context.Context, from, to uint64) error {
	var cmds []core.Command
	for sq := from; sq <= to; sq++ {
		rctx, cancel := context.WithTimeout(ctx, s.log.cfg.Attempt) // as Tail's reads
		r, err := s.log.get(rctx, sq)
		cancel()
		if err != nil {
			return err
		}
		if err := s.apply(r, &cmds); err != nil {
			return err
		}
		s.streamSeq.Store(sq)
	}
	return nil
}

// errSwitched marks a promotion that failed after the pipeline became the
// primary's: it must not be tried again (the node would read its own
// commands back as a standby); the process serves again instead.
var errSwitched = errors.New("replication: promotion failed after the switch to primary")

// ensureVenue gives a claim without a venue this node's own (createVenue):
// the first claim of a venue whose nodes all started as standbys.
func (s *Standby) ensureVenue() error {
	s.log.mu.Lock()
	have := s.log.cfg.Venue
	s.log.mu.Unlock()
	if have != "" || s.createVenue == nil {
		return nil
	}
	v, err := s.createVenue()
	if err != nil {
		return fmt.Errorf("replication: the venue's id: %w", err)
	}
	s.log.setVenue(v)
	return nil
}

// Promote makes this standby the primary: it stops following, reads the
// log to its end, claims it with the next epoch (reading on and claiming
// again while another node appends), and switches the pipeline to the
// primary's mode: with sync, every group commit is then stored in the log
// before it is acknowledged; without, the caller runs Async. The old
// writer's next append is refused (ErrFenced). A node starting as the
// primary takes the same path.
func (s *Standby) Promote(ctx context.Context, sync bool) (epoch uint64, err error) {
	s.mu.Lock()
	s.promoted.Store(true)
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	if err := s.position(ctx); err != nil {
		return 0, err
	}
	for {
		last, tail, err := s.log.Tail(ctx)
		if err != nil {
			return 0, err
		}
		if from := s.streamSeq.Load() + 1; from <= last {
			read := s.follow
			if last-from < catchUpDirect {
				read = s.catchUp
			}
			if err := read(ctx, from, last); err != nil {
				return 0, err
			}
		}
		var logLast core.Seq
		if tail != nil {
			logLast = tail.Last()
		}
		if s.lease != nil && !s.lease.Held() {
			// Automatic failover: only the lease's holder claims the log (a
			// promoted node's restart as the primary whose lease lapsed
			// meanwhile would otherwise fence the node that took it).
			return 0, fmt.Errorf("%w: not claiming the log", ErrLeaseLost)
		}
		if tail != nil && tail.Kind == KindEpoch && tail.Node == s.log.cfg.Node && tail.Epoch == s.epoch.Load() {
			// Our own claim is the log's last record (a promoted node
			// serving again as the primary): it still holds.
			epoch = tail.Epoch
			s.log.adopt(epoch, last, logLast)
		} else {
			epoch = s.epoch.Load() + 1
			if err := s.ensureVenue(); err != nil {
				return 0, err
			}
			err = s.log.Claim(ctx, last, logLast, epoch)
		}
		if errors.Is(err, ErrBehind) {
			continue // the old primary appended meanwhile: read it too
		}
		if err != nil {
			return 0, err
		}
		s.epoch.Store(epoch)
		// A restarted primary's WAL may end past the log: never
		// acknowledged, but applied here; the log gets them first.
		if core.Seq(s.submitted.Load()) > logLast {
			if err := s.appendTail(ctx, logLast); err != nil {
				return 0, err
			}
		}
		s.switched.Store(true)
		if sync && s.lease != nil {
			s.pl.Promote(LeasedReplicator{Log: s.log, Lease: s.lease})
		} else if sync {
			s.pl.Promote(s.log)
		} else {
			s.pl.Promote(nil)
		}
		// The primary now: it trips what its recovery found open as a
		// standby (which issues no command), as a primary's start does.
		if err := s.pl.TripDeferred(ctx); err != nil {
			return 0, fmt.Errorf("%w: the recovery's breaker trips: %w", errSwitched, err)
		}
		return epoch, nil
	}
}
