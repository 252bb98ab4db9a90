package journal

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/logging"
)

var clockBase = time.Now()

// nanotime is a monotonic clock in ns (for latency only, never for state).
func nanotime() int64 { return int64(time.Since(clockBase)) }

// journaler encodes every published command into the WAL: everything ready
// (up to MaxBatch, after gather let the batch grow) goes in one WriteBatch
// and one fsync, during which the journaler keeps its P (holdPolicy),
// then durable_seq is published and the batch released. A failed append is
// sticky: the pipeline stops.
func (pl *Pipeline) journaler() {
	defer pl.wg.Done()
	defer func() { // durable will not grow any more: release every waiter
		if pl.repst == nil { // else the replication stage owns durable
			pl.jDone.Store(true)
			pl.durWait.notify()
		}
	}()
	var (
		buf      []byte
		offs     []int
		entries  []Entry
		payloads [][]byte // entries' payloads for the Replicator
	)
	next := int64(1)
	for {
		hi, err := pl.jst.WaitFor(next)
		if err != nil {
			return
		}
		hi = gather(next, hi, int64(pl.cfg.MaxBatch), pl.cfg.GatherYields, pl.jst.Available, runtime.Gosched)
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
		t0 := nanotime()
		payloads, err = pl.repAppend(entries, payloads)
		if err == nil {
			err = pl.wal.AppendBatch(entries)
		}
		if err != nil {
			pl.jst.Halt()
			pl.fail(err)
			return
		}
		if pl.cfg.OnJournalBatch != nil {
			pl.cfg.OnJournalBatch(len(entries), time.Duration(nanotime()-t0))
		}
		if pl.repst != nil { // durable once the log holds it too
			pl.jst.Commit(hi)
			next = hi + 1
			continue
		}
		pl.durable.Store(uint64(pl.base) + uint64(hi))
		pl.durWait.notify()
		pl.jst.Commit(hi)
		pl.release()
		next = hi + 1

	}
}

// gather lets a group commit grow before it is written: while the batch
// [next, hi] is below maxBatch, the journaler yields (runtime.Gosched) so
// that goroutines already holding a request (HTTP handlers parsing, about
// to publish) run and publish it, and it stops at the first yield that
// brings nothing new, or after maxYields yields. It returns the new hi.
//
// Why: under load the HTTP requests of one released batch come back as a
// wave, and the journaler, idle until the first of them is published,
// committed that one alone (a whole fdatasync for 1 command) while the
// rest of the wave waited for the next one. Traced with `bench http --conns
// 256`: 33–43% of the group commits carried a single command; with
// gathering 8–12%, and the mean batch went from ~30 to ~70 commands.
// Without load nothing else is runnable, the first yield returns at once
// with nothing new, and the command is committed after one Gosched (~1 µs).
// available and yield are pl.jst.Available and runtime.Gosched (tests pass
// their own).
func gather(next, hi, maxBatch int64, maxYields int, available func() int64, yield func()) int64 {
	for i := 0; i < maxYields && hi-next+1 < maxBatch; i++ {
		yield()
		h := available()
		if h <= hi {
			break
		}
		hi = h
	}
	return hi
}

// processorCommitEvery bounds how many applied commands wait for the end of
// a batch before they may be released.
const processorCommitEvery = 256

// processor applies every published command to the core, speculatively
// ahead of the fsync. Nothing it produces leaves the process before release
// sees the command durable.
func (pl *Pipeline) processor() {
	defer pl.wg.Done()
	if pl.cfg.RealtimeProcessor && pl.realtime() {
		defer pl.normal() // before wg.Done: no real-time thread once Close returns
	}
	next := int64(1)
	for {
		hi, err := pl.pst.WaitFor(next)
		if err != nil {
			return
		}
		for s := next; s <= hi; s++ {
			if s > next && (s-next)%processorCommitEvery == 0 {
				pl.applied.Store(uint64(pl.base) + uint64(s-1))
				pl.pst.Commit(s - 1) // release acks while a big batch is applied
				pl.releaseApplied()
			}
			slot := pl.ring.Slot(s)
			var t0 int64
			if pl.cfg.MeasureApply {
				t0 = nanotime()
			}
			evs, discard := pl.applySafe(&slot.Cmd)
			if pl.cfg.MeasureApply && slot.Cmd.Seq >= pl.cfg.MeasureApplyFrom {
				if d := nanotime() - t0; d > pl.maxApply.Load() {
					pl.maxApply.Store(d)
				}
			}
			slot.Discard = discard
			if evs == nil { // a discarded command whose rebuild failed: the pipeline has failed
				if s > next {
					pl.applied.Store(uint64(pl.base) + uint64(s-1))
					pl.pst.Commit(s - 1)
					pl.releaseApplied()
				}
				pl.pst.Halt()
				return
			}
			slot.Result = evs[len(evs)-1]
			if r := slot.Reply; r != nil {
				if r.ResultOnly {
					r.Events = append(r.Events[:0], evs[len(evs)-1])
				} else {
					r.Events = append(r.Events[:0], evs...)
				}
			}
		}
		pl.applied.Store(uint64(pl.base) + uint64(hi))
		pl.pst.Commit(hi)
		pl.releaseApplied()
		next = hi + 1
	}
}

// setRealtime and setNormal are realtimeThread and normalThread; tests
// wrap them (a refusal, the thread the reset ran on).
var setRealtime, setNormal = realtimeThread, normalThread

// realtime puts the processor goroutine on a real-time thread
// (Config.RealtimeProcessor) and reports whether it did, or logs why not
// (the goroutine then runs as without the setting).
func (pl *Pipeline) realtime() bool {
	tid, err := setRealtime()
	if err != nil {
		pl.log.Warn("journal: the processor's thread could not get real-time priority; it runs at normal priority",
			"err", err.Error())
		return false
	}
	pl.rtTID.Store(int64(tid))
	pl.log.Info("journal: the processor runs on a real-time thread (SCHED_FIFO 1)", "tid", tid)
	return true
}

// normal ends realtime, as the processor returns.
func (pl *Pipeline) normal() {
	if err := setNormal(); err != nil { // it keeps the nice level: no privilege needed
		pl.log.Error("journal: the processor's thread could not leave real-time priority", "err", err.Error())
	}
	pl.rtTID.Store(0)
}

// releaseApplied is release after a processor commit; with a read view the
// viewer releases instead, since the view must hold a command first.
func (pl *Pipeline) releaseApplied() {
	if pl.vst == nil {
		pl.release()
	}
}

// applySafe applies c. A panic inside apply discards the command: a poison
// command, or a per-command check that failed (a *core.Rollback). The
// in-memory state is then rebuilt from snapshot + WAL up to c.Seq-1 and c is
// discarded on it (core.Processor.Discard: POISON_COMMAND, or
// INVARIANT_VIOLATION and a breaker trip); replay does the same, so the
// outcome is deterministic. It returns the events and, for a discarded
// command, why (nil otherwise).
func (pl *Pipeline) applySafe(c *core.Command) (evs []core.Event, discard *core.Rollback) {
	defer func() {
		if r := recover(); r != nil {
			rb := core.AsRollback(r)
			evs, discard = pl.discard(c, rb, r), &rb
		}
	}()
	return pl.proc.Apply(c), nil
}

func (pl *Pipeline) discard(c *core.Command, rb core.Rollback, cause any) []core.Event {
	if rb.Reason != core.ReasonNone {
		logging.Critical(context.Background(), pl.log, "journal: a command failed its per-command checks; rolled back and rejected, breaker tripped",
			"seq", c.Seq, "kind", c.Kind.String(), "market", rb.Market, "asset", rb.Asset,
			"detail", core.ViolName(rb.Detail), "reason", rb.Reason.String())
	} else {
		pl.log.Error("journal: poison command; rebuilding state", "seq", c.Seq, "kind", c.Kind.String(),
			"panic", fmt.Sprint(cause))
	}
	// The journaler is independent of us: it gets there unless it stops.
	if err := pl.waitDurable(c.Seq - 1); err != nil {
		pl.fail(fmt.Errorf("journal: discarded command at seq %d while the journal stopped: %w", c.Seq, err))
		return nil // the state is unusable; a restart recovers from disk
	}
	pl.poisoned[c.Seq] = rb
	// The state follower must not truncate the WAL behind the base this
	// rebuild replays from (it may write two snapshots meanwhile): set
	// rebuilding before loading the base; the follower stores a new base
	// before it reads rebuilding (both sequentially consistent), so either
	// it skips that truncation or this rebuild loads its newer base.
	pl.rebuilding.Store(true)
	proc, err := rebuild(*pl.baseSnap.Load(), pl.wal, pl.cfg.Core, c.Seq-1, pl.poisoned)
	if errors.Is(err, errBaseAhead) { // the follower's newest snapshot is past c: an older one of the store
		base := core.New(pl.cfg.Core).AppendSnapshot(nil)
		if _, data, lerr := latestAtOrBelow(pl.snaps, uint64(c.Seq-1), pl.log); lerr == nil {
			base = data
		} else if !errors.Is(lerr, ErrNoSnapshot) {
			base, err = nil, lerr
		}
		if base != nil {
			proc, err = rebuild(base, pl.wal, pl.cfg.Core, c.Seq-1, pl.poisoned)
		}
	}
	pl.rebuilding.Store(false)
	if err != nil {
		pl.fail(fmt.Errorf("journal: rebuild after the discarded command at seq %d: %w", c.Seq, err))
		return nil // the state is unusable; a restart recovers from disk
	}
	pl.proc = proc
	pl.evictions.Add(1)
	pl.recoveries.Add(1)
	return proc.Discard(c, rb)
}

// release hands out every command that is both durable and applied (with a
// read view: also in the view), in seq order: Config.OnAck, then the Reply.
// The journaler and the processor (or the viewer) call it after each commit,
// so whichever completes a command last releases it at once, with no
// goroutine hand-off between the fsync and the ack.
//
// One caller at a time releases (relBusy); a caller that finds it taken
// leaves its work to the holder through relPending. No commit is missed:
// the caller stores its commit, then relPending, then fails its CAS of
// relBusy, so (sync/atomic being sequentially consistent) either the
// holder's release reads that commit, or the holder clears relPending
// before it and finds it set again after giving up relBusy, and loops.
func (pl *Pipeline) release() {
	pl.relPending.Store(true)
	for pl.relPending.Load() && pl.relBusy.CompareAndSwap(false, true) {
		pl.relPending.Store(false)
		hi := pl.rst.Available()
		for s := pl.relNext; s <= hi; s++ {
			slot := pl.ring.Slot(s)
			if pl.cfg.OnAck != nil {
				pl.cfg.OnAck(slot)
			}
			if r := slot.Reply; r != nil {
				slot.Reply = nil
				r.done <- struct{}{}
			}
		}
		if hi >= pl.relNext {
			pl.acked.Store(uint64(pl.base) + uint64(hi))
			pl.rst.Commit(hi) // frees the slots for the producers
			pl.relNext = hi + 1
		}
		pl.relBusy.Store(false)
	}
}

// viewerChunk bounds how many commands the viewer applies under one write
// lock (readers wait at most that long) and before it lets acks through.
const viewerChunk = 256

// viewer keeps the read replica: it re-applies every command after the
// processor (a command the processor discarded after a rebuild is
// discarded the same way without applying it), calls OnView, and
// commits so acks can be released: an answered command is always
// in the view.
func (pl *Pipeline) viewer() {
	defer pl.wg.Done()
	next := int64(1)
	for {
		hi, err := pl.vst.WaitFor(next)
		if err != nil {
			return
		}
		for lo := next; lo <= hi; lo += viewerChunk {
			end := min(hi, lo+viewerChunk-1)
			pl.viewMu.Lock()
			for s := lo; s <= end; s++ {
				slot := pl.ring.Slot(s)
				c := &slot.Cmd
				var evs []core.Event
				if slot.Discard != nil {
					evs = pl.view.Discard(c, *slot.Discard)
				} else if evs, err = applyView(pl.view, c); err != nil {
					pl.viewMu.Unlock()
					pl.vst.Halt()
					pl.fail(err)
					return
				}
				if pl.cfg.OnView != nil {
					pl.cfg.OnView(c, evs)
				}
			}
			pl.viewSeq = pl.base + core.Seq(end)
			pl.viewMu.Unlock()
			pl.vst.Commit(end)
			pl.release()
		}
		next = hi + 1
	}
}

// applyView applies c to the replica; a panic there (the processor did not
// panic on c) means the two diverged, which must stop the pipeline.
func applyView(p *core.Processor, c *core.Command) (evs []core.Event, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("journal: read view panicked at seq %d where the processor did not: %v", c.Seq, r)
		}
	}()
	return p.Apply(c), nil
}
