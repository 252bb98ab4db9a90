package journal

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/ubscore/ubscore/core"
)

// ErrHistoryGone is returned (wrapped in a *HistoryGoneError) by
// NewFollower when the events from the requested seq can no longer be
// derived: the WAL before it was truncated and no snapshot at or below it is
// left.
var ErrHistoryGone = errors.New("journal: history no longer available")

// HistoryGoneError says from which seq a Follower could start instead.
type HistoryGoneError struct {
	From     core.Seq // the seq asked for
	Earliest core.Seq // the lowest seq a Follower can start at
}

func (e *HistoryGoneError) Error() string {
	return fmt.Sprintf("journal: events from seq %d can no longer be derived (earliest: %d)", e.From, e.Earliest)
}

func (e *HistoryGoneError) Is(target error) bool { return target == ErrHistoryGone }

// Follower re-derives, from the WAL, the events of durable commands in seq
// order, for consumers downstream of the durability point (the Postgres
// sink). It owns a replica processor that starts at a snapshot at or below
// its first seq and re-applies every command, so it is independent of the
// pipeline's goroutines: a slow consumer never stalls the core, and after a
// restart (or a wiped database) it catches up from the same code path.
// Pair it with Config.TruncateLimit so the WAL it still needs is kept.
//
// A Follower is used by one goroutine at a time.
type Follower struct {
	pl       *Pipeline
	proc     *core.Processor
	base     []byte                     // serialized state the replica started from (poison rebuilds)
	poisoned map[core.Seq]core.Rollback // commands discarded instead of applied
	next     core.Seq                   // the next seq to return
	cursor   WALCursor                  // where the last WAL read stopped: the next one starts there
	// background marks the state follower, whose replica only needs the
	// state: Next leaves FollowRecord.Events empty (copying every command's
	// events, ~150 B each and several per command, was a share of its CPU
	// per command), and it yields its P every backgroundYield commands so
	// that the pipeline's goroutines, which share the Ps with it, wait for
	// it at most that long (p99.9 on/off at half load 1.58 -> 1.25, medians
	// of three runs; docs/state-at-scale.md).
	background bool

	cmds   []core.Command // batch buffers, reused by Next
	evs    []core.Event
	starts []int // index in evs of each command's first event
	recs   []FollowRecord
}

// backgroundYield is how many commands a background follower applies
// between yields (about 30-60 µs of work).
const backgroundYield = 64

// errFollowStop ends a follower's WAL iteration at the batch's last seq.
var errFollowStop = errors.New("journal: follower batch full")

// FollowRecord is one durable command and its events (the last is the
// EvResult). Valid until the next call of Next.
type FollowRecord struct {
	Cmd    *core.Command
	Events []core.Event
}

// NewFollower returns a Follower whose first record is seq from (>= 1).
func (pl *Pipeline) NewFollower(from core.Seq) (*Follower, error) {
	if from < 1 {
		from = 1
	}
	if from > pl.DurableSeq()+1 {
		return nil, fmt.Errorf("journal: follow from seq %d beyond the durable seq %d", from, pl.DurableSeq())
	}
	f := &Follower{pl: pl, poisoned: map[core.Seq]core.Rollback{}, next: from}
	var base []byte
	snapSeq, data, err := latestAtOrBelow(pl.snaps, uint64(from-1), pl.log)
	switch {
	case err == nil:
		base = data
	case errors.Is(err, ErrNoSnapshot):
		snapSeq = 0
		base = core.New(pl.cfg.Core).AppendSnapshot(nil)
	default:
		return nil, err
	}
	if first := pl.wal.FirstSeq(); snapSeq+1 < first {
		earliest := core.Seq(first)
		if s, ok := pl.snaps.OldestSeq(); ok {
			earliest = core.Seq(s) + 1
		}
		return nil, &HistoryGoneError{From: from, Earliest: earliest}
	}
	proc, err := rebuild(base, pl.wal, pl.cfg.Core, from-1, f.poisoned)
	if err != nil {
		return nil, err
	}
	f.proc, f.base = proc, base
	return f, nil
}

// NextSeq is the seq of the next record Next returns.
func (f *Follower) NextSeq() core.Seq { return f.next }

// Next waits until at least one more command is durable (or ctx is done, or
// the pipeline has stopped with nothing more to give: ErrStopped) and returns
// up to max records.
func (f *Follower) Next(ctx context.Context, max int) ([]FollowRecord, error) {
	if max < 1 {
		max = 1
	}
	for f.pl.DurableSeq() < f.next {
		if f.pl.jDone.Load() && f.pl.DurableSeq() < f.next {
			return nil, ErrStopped
		}
		// Sleep until the journaler publishes a commit (or stops): no
		// polling, so a caught-up sink costs nothing while the core idles.
		woken := f.pl.durWait.changed()
		if f.pl.DurableSeq() >= f.next || f.pl.jDone.Load() {
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-woken:
		}
	}
	hi := min(f.pl.DurableSeq(), f.next+core.Seq(max)-1)
	f.cmds = f.cmds[:0]
	err := f.pl.wal.IterateCursor(&f.cursor, uint64(f.next), func(seq uint64, payload []byte) error {
		if core.Seq(seq) > hi {
			return errFollowStop
		}
		var c core.Command
		if err := core.DecodeCommand(payload, &c); err != nil {
			return fmt.Errorf("journal: follower: decode seq %d: %w", seq, err)
		}
		f.cmds = append(f.cmds, c)
		return nil
	})
	if err != nil && err != errFollowStop {
		return nil, err
	}
	f.evs, f.recs, f.starts = f.evs[:0], f.recs[:0], f.starts[:0]
	for i := range f.cmds {
		c := &f.cmds[i]
		if c.Seq != f.next {
			return nil, fmt.Errorf("journal: follower: expected seq %d, WAL gave %d", f.next, c.Seq)
		}
		f.starts = append(f.starts, len(f.evs))
		evs, err := f.apply(c)
		if err != nil {
			return nil, err
		}
		if !f.background {
			f.evs = append(f.evs, evs...)
		} else if i%backgroundYield == backgroundYield-1 {
			runtime.Gosched()
		}
		f.next++
	}
	f.starts = append(f.starts, len(f.evs))
	for i := range f.cmds {
		lo, hi := f.starts[i], f.starts[i+1]
		f.recs = append(f.recs, FollowRecord{Cmd: &f.cmds[i], Events: f.evs[lo:hi:hi]})
	}
	return f.recs, nil
}

// apply applies c to the replica; a command the processor discarded (a
// panic: poison, or a failed per-command check) rebuilds the replica without
// it and discards it, exactly as the processor and recovery do.
func (f *Follower) apply(c *core.Command) (evs []core.Event, err error) {
	if rb, known := f.poisoned[c.Seq]; known {
		return f.proc.Discard(c, rb), nil
	}
	var rb core.Rollback
	func() {
		defer func() {
			if r := recover(); r != nil {
				evs, rb = nil, core.AsRollback(r)
			}
		}()
		evs = f.proc.Apply(c)
	}()
	if evs != nil {
		return evs, nil
	}
	f.poisoned[c.Seq] = rb
	base := f.base // the WAL after it may be truncated by now: prefer a newer snapshot
	if _, data, err := latestAtOrBelow(f.pl.snaps, uint64(c.Seq-1), f.pl.log); err == nil {
		base = data
	}
	proc, err := rebuild(base, f.pl.wal, f.pl.cfg.Core, c.Seq-1, f.poisoned)
	if err != nil {
		return nil, fmt.Errorf("journal: follower: rebuild after poison command at seq %d: %w", c.Seq, err)
	}
	f.proc = proc
	return f.proc.Discard(c, rb), nil
}

// StateHash is the replica's state hash (tests compare it with the core's).
func (f *Follower) StateHash() string { return f.proc.StateHash() }
