package replication

import (
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
}

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
	streamSeq atomic.Uint64 // the last record read
	epoch     atomic.Uint64 // the newest epoch seen
	submitted atomic.Uint64 // the last command handed to the pipeline
	lastTime  atomic.Int64  // that command's Time (unix ns)
	promoted  atomic.Bool
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

// Submitted is the last command handed to the pipeline, and its Time.
func (s *Standby) Submitted() (core.Seq, int64) {
	return core.Seq(s.submitted.Load()), s.lastTime.Load()
}

// Run follows the log until ctx ends, Promote is called, or an error (a
// record out of order, the pipeline stopped). Call it once.
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
	from, err := s.log.Seek(ctx, core.Seq(s.submitted.Load())+1)
	if err != nil {
		return err
	}
	err = s.follow(ctx, from, 0)
	if s.promoted.Load() && ctx.Err() != nil {
		return nil
	}
	return err
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
	if r.Epoch > s.epoch.Load() {
		s.epoch.Store(r.Epoch)
	}
	if r.Kind != KindCommands {
		return nil // KindHash: compared by the state-hash check (not yet built)
	}
	have := core.Seq(s.submitted.Load())
	if r.Seq > have+1 {
		return fmt.Errorf("replication: the log skips from command %d to %d", have, r.Seq)
	}
	cmds := (*buf)[:0]
	for i, b := range r.Commands {
		seq := r.Seq + core.Seq(i)
		if seq <= have {
			continue // already in this node's WAL
		}
		var c core.Command
		if err := core.DecodeCommand(b, &c); err != nil {
			return fmt.Errorf("replication: command %d: %w", seq, err)
		}
		if c.Seq != seq {
			return fmt.Errorf("replication: record of command %d holds command %d", seq, c.Seq)
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

// Promote makes this standby the primary: it stops following, reads the
// log to its end, claims it with the next epoch (reading on and claiming
// again while another node appends), and switches the pipeline to the
// primary's mode, every group commit then stored in the log first. The old
// writer's next append is refused (ErrFenced).
func (s *Standby) Promote(ctx context.Context) (epoch uint64, err error) {
	s.mu.Lock()
	s.promoted.Store(true)
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	for {
		last, _, err := s.log.Tail(ctx)
		if err != nil {
			return 0, err
		}
		if err := s.follow(ctx, s.streamSeq.Load()+1, last); err != nil {
			return 0, err
		}
		epoch = s.epoch.Load() + 1
		err = s.log.Claim(ctx, last, core.Seq(s.submitted.Load()), epoch)
		if errors.Is(err, ErrBehind) {
			continue // the old primary appended meanwhile: read it too
		}
		if err != nil {
			return 0, err
		}
		s.epoch.Store(epoch)
		s.pl.Promote(s.log)
		return epoch, nil
	}
}
