package journal

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal/ring"
)

// Replicator is the replicated command log of sync replication (docs/design.md, "Replication";
// package replication): the journaler hands it every group commit before
// its local write (Append, without waiting: several group commits may be in
// flight), and the replication stage — a ring stage after the journaler —
// makes a command durable (durable_seq, replies, the read view's answers,
// every follower) only once the local fsync is done and WaitStored says the
// log holds it too.
type Replicator interface {
	// Append starts storing cmds (the WAL payloads of commands first...)
	// without waiting; it must copy what it keeps. Journaler goroutine.
	Append(first core.Seq, cmds [][]byte) error
	// WaitStored returns once every command up to seq is stored, or an
	// error: the pipeline then stops (a fenced node acknowledges nothing
	// more). Replication stage goroutine.
	WaitStored(ctx context.Context, seq core.Seq) error
}

// Errors of a standby pipeline.
var (
	// ErrStandby: Submit on a standby, which applies only the commands of
	// the replicated log (SubmitSequenced) and issues none of its own.
	ErrStandby = errors.New("journal: standby: this node applies the primary's commands and issues none")
	// ErrSequence: SubmitSequenced out of order.
	ErrSequence = errors.New("journal: sequenced commands out of order")
	// ErrNotStandby: SubmitSequenced on a primary.
	ErrNotStandby = errors.New("journal: not a standby")
)

// replicateCloseGrace bounds how long Close lets a group commit wait for
// the replicated log (e.g. while the NATS cluster has no quorum) before it
// gives up on it; the batch then stays in the local WAL only, unacknowledged.
const replicateCloseGrace = 10 * time.Second

// repBox holds the Replicator (an interface cannot be stored in an
// atomic.Pointer directly).
type repBox struct{ r Replicator }

// replicator is the current Replicator (nil: none).
func (pl *Pipeline) replicator() Replicator {
	if b := pl.rep.Load(); b != nil {
		return b.r
	}
	return nil
}

// repAppend is the journaler's part of sync replication for one group
// commit, before its local write: send entries to the replicated log.
// payloads is a buffer the journaler keeps.
func (pl *Pipeline) repAppend(entries []Entry, payloads [][]byte) ([][]byte, error) {
	rep := pl.replicator()
	if rep == nil {
		return payloads, nil
	}
	payloads = payloads[:0]
	for _, e := range entries {
		payloads = append(payloads, e.Payload)
	}
	if err := rep.Append(core.Seq(entries[0].Seq), payloads); err != nil {
		return payloads, fmt.Errorf("journal: replicate: %w", err)
	}
	return payloads, nil
}

// replicationStage runs after the journaler when the pipeline may
// replicate (Config.Replicator or Config.Standby): what the journaler has
// fsynced becomes durable once the replicated log has stored it too (at
// once when there is no Replicator: a standby, whose log is the primary's).
// It owns durable_seq then.
func (pl *Pipeline) replicationStage() {
	defer pl.wg.Done()
	defer func() { // durable will not grow any more: release every waiter
		pl.jDone.Store(true)
		pl.durWait.notify()
	}()
	next := int64(1)
	for {
		hi, err := pl.repst.WaitFor(next)
		if err != nil {
			return
		}
		if rep := pl.replicator(); rep != nil {
			if err := rep.WaitStored(pl.repCtx, pl.base+core.Seq(hi)); err != nil {
				pl.repst.Halt()
				pl.fail(fmt.Errorf("journal: replicate commands up to %d: %w", pl.base+core.Seq(hi), err))
				return
			}
		}
		pl.durable.Store(uint64(pl.base) + uint64(hi))
		pl.durWait.notify()
		pl.repst.Commit(hi)
		pl.release()
		next = hi + 1
	}
}

// SubmitSequenced applies commands a primary sequenced (a standby
// following the replicated log): they keep their Seq and Time, and must
// continue the pipeline's seq exactly (ErrSequence otherwise, and nothing
// is submitted). One goroutine only. It waits while the ring is full.
func (pl *Pipeline) SubmitSequenced(cmds []core.Command) error {
	if !pl.standby.Load() {
		return ErrNotStandby
	}
	for len(cmds) > 0 {
		n := min(len(cmds), pl.ring.Cap())
		next := pl.base + core.Seq(pl.ring.Claimed()) + 1
		for i := range cmds[:n] {
			if cmds[i].Seq != next+core.Seq(i) || !cmds[i].Kind.Valid() {
				return fmt.Errorf("%w: command %d (%v) where %d was due", ErrSequence, cmds[i].Seq, cmds[i].Kind, next+core.Seq(i))
			}
		}
		lo, hi, err := pl.ring.Claim(n)
		if err != nil {
			return ErrStopped
		}
		enq := nanotime()
		for i := lo; i <= hi; i++ {
			s := pl.ring.Slot(i)
			s.Cmd = cmds[i-lo]
			s.Reply = nil
			s.Enq = enq
		}
		pl.ring.Publish(lo, hi)
		cmds = cmds[n:]
	}
	return nil
}

// Promote turns a standby into the primary: from now on it sequences
// commands of its own (Submit), and, with rep, every group commit is
// durable only once rep stores it. The caller has applied the whole
// replicated log and claimed it (an epoch marker) first.
func (pl *Pipeline) Promote(rep Replicator) {
	if rep != nil {
		pl.rep.Store(&repBox{r: rep})
	}
	pl.standby.Store(false)
}

// standbyCheck is Submit's refusal on a standby.
func (pl *Pipeline) standbyCheck() error {
	if pl.standby.Load() {
		return ErrStandby
	}
	return nil
}

// repState is the Pipeline's replication state.
type repState struct {
	rep       atomic.Pointer[repBox]
	repst     *ring.Stage[Slot] // the replication stage (nil: durable once fsynced)
	standby   atomic.Bool
	repCtx    context.Context // Wait's context: ends replicateCloseGrace after Close begins
	repCancel context.CancelFunc
	// deferredTrips: what a standby's recovery found open and did not trip
	// (tripRecovered), for TripDeferred after a promotion.
	deferredTrips atomic.Pointer[[]core.Violation]
}

// IterateWAL calls fn for every durable command from seq from on (its WAL
// payload, valid during fn only), in order, from the WAL's first entry if
// from is older; an error from fn stops it and is returned.
func (pl *Pipeline) IterateWAL(from core.Seq, fn func(seq core.Seq, payload []byte) error) error {
	from = max(from, core.Seq(pl.wal.FirstSeq()))
	return pl.wal.Iterate(uint64(from), func(seq uint64, payload []byte) error { return fn(core.Seq(seq), payload) })
}

// ViewSeq is the seq the read view reflects (the applied seq without
// Config.ReadView): what a read answered now holds at least.
func (pl *Pipeline) ViewSeq() core.Seq {
	if pl.view == nil {
		return pl.AppliedSeq()
	}
	pl.viewMu.RLock()
	defer pl.viewMu.RUnlock()
	return pl.viewSeq
}
