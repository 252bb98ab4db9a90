package journal

import (
	"fmt"
	"time"

	"github.com/ubscore/ubscore/core"
)

var clockBase = time.Now()

// nanotime is a monotonic clock in ns (for latency only, never for state).
func nanotime() int64 { return int64(time.Since(clockBase)) }

// journaler encodes every published command into the WAL: everything ready
// (up to MaxBatch) goes in one WriteBatch and one fsync, then durable_seq is
// published. A failed append is sticky: the pipeline stops.
func (pl *Pipeline) journaler() {
	defer pl.wg.Done()
	var (
		buf     []byte
		offs    []int
		entries []Entry
	)
	next := int64(1)
	for {
		hi, err := pl.jst.WaitFor(next)
		if err != nil {
			return
		}
		if hi-next+1 > int64(pl.cfg.MaxBatch) {
			hi = next + int64(pl.cfg.MaxBatch) - 1
		}
		buf, offs, entries = buf[:0], offs[:0], entries[:0]
		for s := next; s <= hi; s++ {
			offs = append(offs, len(buf))
			buf = core.EncodeCommand(buf, &pl.ring.Slot(s).Cmd)
		}
		offs = append(offs, len(buf))
		for i := range offs[:len(offs)-1] {
			entries = append(entries, Entry{Seq: uint64(pl.base) + uint64(next) + uint64(i), Payload: buf[offs[i]:offs[i+1]]})
		}
		if err := pl.wal.AppendBatch(entries); err != nil {
			pl.jst.Halt()
			pl.fail(err)
			return
		}
		pl.durable.Store(uint64(pl.base) + uint64(hi))
		pl.jst.Commit(hi)
		next = hi + 1
		if t := pl.truncReq.Swap(0); t != 0 && t <= pl.wal.LastSeq() {
			if err := pl.wal.TruncateFront(t); err != nil {
				pl.log.Warn("journal: front truncation failed", "seq", t, "err", err)
			}
		}
	}
}

// processorCommitEvery bounds how many applied commands wait for the end of
// a batch before the responder may release them.
const processorCommitEvery = 256

// processor applies every published command to the core, speculatively
// ahead of the fsync. Nothing it produces leaves the process before the
// responder sees the command durable.
func (pl *Pipeline) processor() {
	defer pl.wg.Done()
	next := int64(1)
	for {
		hi, err := pl.pst.WaitFor(next)
		if err != nil {
			return
		}
		for s := next; s <= hi; s++ {
			if s > next && (s-next)%processorCommitEvery == 0 {
				pl.applied.Store(uint64(pl.base) + uint64(s-1))
				pl.pst.Commit(s - 1) // let the responder release acks while a big batch is applied
			}
			slot := pl.ring.Slot(s)
			evs := pl.applySafe(&slot.Cmd)
			slot.Result = evs[len(evs)-1]
			if slot.Reply != nil {
				slot.Reply.Events = append(slot.Reply.Events[:0], evs...)
			}
			seq := slot.Cmd.Seq
			if slot.Cmd.Kind == core.KindSnapshot || uint64(seq-pl.lastSnap) >= pl.cfg.SnapshotEvery {
				pl.takeSnapshot(seq)
			}
		}
		pl.applied.Store(uint64(pl.base) + uint64(hi))
		pl.pst.Commit(hi)
		next = hi + 1
	}
}

// takeSnapshot serializes the state on the processor goroutine and hands it
// to the snapshot writer, which writes it only once seq is durable (a
// snapshot must never cover a command the WAL could still lose).
func (pl *Pipeline) takeSnapshot(seq core.Seq) {
	data := pl.proc.AppendSnapshot(nil)
	select {
	case pl.snapJobs <- snapJob{seq: seq, data: data}:
		pl.lastSnap = seq
		pl.baseSnap = data // the writer only reads it
	default: // the writer is busy: try again at the next opportunity
	}
}

// applySafe applies c; a panic inside apply is a poison command: the
// in-memory state is discarded and rebuilt from snapshot + WAL up to c.Seq-1,
// and c is rejected with POISON_COMMAND (replay does the same, so the outcome
// is deterministic).
func (pl *Pipeline) applySafe(c *core.Command) (evs []core.Event) {
	defer func() {
		if r := recover(); r != nil {
			evs = pl.poison(c, r)
		}
	}()
	return pl.proc.Apply(c)
}

func (pl *Pipeline) poison(c *core.Command, cause any) []core.Event {
	pl.log.Error("journal: poison command; rebuilding state", "seq", c.Seq, "kind", c.Kind.String(),
		"panic", fmt.Sprint(cause))
	for pl.DurableSeq() < c.Seq-1 && pl.Err() == nil {
		time.Sleep(100 * time.Microsecond) // the journaler is independent of us: it will get there
	}
	pl.poisoned[c.Seq] = true
	proc, err := rebuild(pl.baseSnap, pl.wal, pl.cfg.Core, c.Seq-1, pl.poisoned)
	if err != nil {
		pl.fail(fmt.Errorf("journal: rebuild after poison command at seq %d: %w", c.Seq, err))
		panic(err) // the state is unusable; the process must restart from disk
	}
	pl.proc = proc
	return proc.Skip(c, core.CodePoisonCommand)
}

// responder releases each command once it is both durable and applied.
func (pl *Pipeline) responder() {
	defer pl.wg.Done()
	next := int64(1)
	for {
		hi, err := pl.rst.WaitFor(next)
		if err != nil {
			return
		}
		for s := next; s <= hi; s++ {
			slot := pl.ring.Slot(s)
			if pl.cfg.OnAck != nil {
				pl.cfg.OnAck(slot)
			}
			if r := slot.Reply; r != nil {
				slot.Reply = nil
				r.done <- struct{}{}
			}
		}
		pl.acked.Store(uint64(pl.base) + uint64(hi))
		pl.rst.Commit(hi)
		next = hi + 1
	}
}

// snapshotter writes snapshots once durable, prunes old ones, and asks the
// journaler to truncate the WAL behind the oldest kept snapshot (never past
// Config.TruncateLimit).
func (pl *Pipeline) snapshotter() {
	defer close(pl.snapDoneCh)
	for job := range pl.snapJobs {
		for pl.DurableSeq() < job.seq {
			if pl.Err() != nil {
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
		if err := pl.snaps.Write(uint64(job.seq), job.data); err != nil {
			pl.log.Error("journal: snapshot write failed", "seq", job.seq, "err", err)
			continue
		}
		pl.log.Info("journal: snapshot written", "seq", job.seq, "bytes", len(job.data))
		oldest, err := pl.snaps.Prune(pl.cfg.KeepSnapshots)
		if err != nil {
			pl.log.Warn("journal: snapshot prune failed", "err", err)
			continue
		}
		limit := oldest
		if pl.cfg.TruncateLimit != nil {
			limit = min(limit, uint64(pl.cfg.TruncateLimit()))
		}
		if limit > 0 {
			pl.truncReq.Store(limit + 1)
		}
	}
}
