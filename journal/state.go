package journal

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/core"
)

// The state follower (issue 39): a replica of the core of its own, fed from
// the durable WAL like every follower (follower.go), that does the work on
// the whole state which used to stall the acknowledgement path:
//
//   - snapshots: every Config.SnapshotEvery commands (exactly: its batches
//     stop there) and after every KindSnapshot (at the end of the batch that
//     holds it), it serializes its replica and writes it; the processor
//     never serializes. Each written
//     snapshot becomes the processor's poison-rebuild base (baseSnap).
//   - the periodic full check (CheckOnState): at the replica's seq, while
//     the processor and the read view go on.
//   - the state hash at an exact seq (StateHashAt), for replication.
//
// It only reads durable commands, so a snapshot never covers a command the
// WAL could still lose. A snapshot trails the processor by the follower's
// lag (normally one batch). Its cost is a second application of every
// command, on another goroutine (docs/state-at-scale.md has the budget).

// stateBatch bounds the commands the state follower applies between two
// looks at its requests.
const stateBatch = 4096

type stateReqKind uint8

const (
	reqCheck stateReqKind = iota + 1
	reqHash
)

type stateReq struct {
	kind  stateReqKind
	seq   core.Seq // reqHash: the seq wanted
	reply chan stateRes
}

type stateRes struct {
	seq  core.Seq
	open []core.Violation
	hash string
	d    time.Duration // the check or hash alone
	err  error
}

// stateStats are the state follower's numbers (StateStats).
type stateStats struct {
	snapshots   atomic.Uint64
	serialized  atomic.Uint64 // serializations of the replica (one per seq at most: stateSerial)
	serializeNs atomic.Int64  // the last snapshot's serialization
	writeNs     atomic.Int64  // the last snapshot's write (temp file, fsync, rename)
	bytes       atomic.Int64  // the last snapshot's size
	seq         atomic.Uint64
}

// stateHashHook is SetStateHashHook's setting (part of Pipeline): the
// interval and the function, stored together (nil: off).
type stateHashHook struct {
	hashHook atomic.Pointer[hashHook]
}

type hashHook struct {
	every uint64
	fn    func(seq core.Seq, hash string)
}

// StateStats is what the state follower did last.
type StateStats struct {
	Snapshots     uint64        // written since start
	Serialized    uint64        // serializations of the replica since start (snapshots and hashes share one per seq)
	LastSerialize time.Duration // of the last snapshot, on the follower
	LastWrite     time.Duration
	LastBytes     int64
	Seq           core.Seq // the follower's replica is at this seq
}

// StateStats returns the state follower's numbers.
func (pl *Pipeline) StateStats() StateStats {
	st := &pl.state
	return StateStats{Snapshots: st.snapshots.Load(), Serialized: st.serialized.Load(), LastSerialize: time.Duration(st.serializeNs.Load()),
		LastWrite: time.Duration(st.writeNs.Load()), LastBytes: st.bytes.Load(), Seq: core.Seq(st.seq.Load())}
}

// newStateFollower returns a follower whose replica is proc, a copy of the
// state at pl.base (recovery's result: no second replay) whose
// serialization is base (its poison-rebuild base).
func (pl *Pipeline) newStateFollower(proc *core.Processor, base []byte) *Follower {
	return &Follower{pl: pl, proc: proc, base: base, poisoned: map[core.Seq]core.Rollback{}, next: pl.base + 1, background: true}
}

// stateSerial is the state follower's serialization of its replica at one
// seq, made at most once and shared by whatever needs it there: the hash
// hook, a snapshot and StateHashAt requests (each used to serialize the
// whole state again). Follower goroutine only.
type stateSerial struct {
	pl   *Pipeline
	f    *Follower
	seq  core.Seq // of data (valid while the replica is at seq)
	data []byte   // nil: none yet
	d    time.Duration
	hash string // "" until asked
}

// bytes returns the replica's serialization at its seq, and how long
// serializing it took. The slice is never modified afterwards (it may
// become the poison-rebuild base).
func (s *stateSerial) bytes() ([]byte, time.Duration) {
	at := s.f.NextSeq() - 1
	if s.data != nil && s.seq == at {
		return s.data, s.d
	}
	prev := *s.pl.baseSnap.Load()
	t0 := time.Now()
	// Sized from the last one: growing a fresh buffer by doubling would copy it several times.
	// Paced: a large state's serialization (tens of ms) yields the follower's
	// P to the pipeline's goroutines every 64 KB instead of holding it.
	s.data = s.f.proc.AppendSnapshotPaced(make([]byte, 0, len(prev)+len(prev)/4+4096), runtime.Gosched)
	s.seq, s.d, s.hash = at, time.Since(t0), ""
	s.pl.state.serialized.Add(1)
	return s.data, s.d
}

// stateHash is the state hash at the replica's seq.
func (s *stateSerial) stateHash() string {
	data, _ := s.bytes()
	if s.hash == "" {
		s.hash = core.StateHashOfPaced(data, runtime.Gosched)
	}
	return s.hash
}

// stateFollower runs the state follower until Close (or a failure).
func (pl *Pipeline) stateFollower(f *Follower) {
	defer close(pl.snapDoneCh)
	var pend []stateReq
	pl.state.seq.Store(uint64(f.NextSeq() - 1))
	// The state at start is serialized already: recovery's base.
	ser := &stateSerial{pl: pl, f: f, seq: f.NextSeq() - 1, data: *pl.baseSnap.Load()}
	// A recovery that replayed SnapshotEvery commands or more past the last
	// snapshot leaves one overdue: write it now, at the recovered (durable)
	// state, rather than after the follower's first batch — under load a
	// process killed again soon would otherwise never snapshot, nor let the
	// WAL front be truncated.
	if seq := f.NextSeq() - 1; seq > pl.lastSnap && uint64(seq-pl.lastSnap) >= pl.cfg.SnapshotEvery {
		pl.storeSnapshot(seq, *pl.baseSnap.Load(), 0) // the recovery's own serialization of this state
	}
	for {
		pend = pl.answer(ser, pend)
		if durable := pl.DurableSeq(); f.NextSeq() <= durable {
			n := min(stateBatch, durable-f.NextSeq()+1)
			if due := pl.lastSnap + core.Seq(min(pl.cfg.SnapshotEvery, 1<<62)); due >= f.NextSeq() {
				n = min(n, due-f.NextSeq()+1) // stop at the periodic snapshot's seq: they land every SnapshotEvery
			}
			for _, r := range pend { // stop exactly at a hash request's seq
				if r.kind == reqHash && r.seq >= f.NextSeq() {
					n = min(n, r.seq-f.NextSeq()+1)
				}
			}
			if h := pl.hashHook.Load(); h != nil { // and at every multiple of the hook's interval
				due := (uint64(f.NextSeq()-1)/h.every + 1) * h.every
				n = min(n, core.Seq(due)-f.NextSeq()+1)
			}
			recs, err := f.Next(pl.stateCtx, int(n))
			if err != nil {
				if !errors.Is(err, context.Canceled) && !errors.Is(err, ErrStopped) {
					pl.fail(fmt.Errorf("journal: state follower: %w", err))
				}
				pl.failPending(pend)
				return
			}
			asked := false
			for i := range recs {
				asked = asked || recs[i].Cmd.Kind == core.KindSnapshot
			}
			seq := f.NextSeq() - 1
			pl.state.seq.Store(uint64(seq))
			if ser.seq != seq {
				ser.data = nil // an older state's: not kept alive (it may be as big as the state)
			}
			if h := pl.hashHook.Load(); h != nil && uint64(seq)%h.every == 0 {
				h.fn(seq, ser.stateHash())
			}
			if asked || (uint64(seq-pl.lastSnap) >= pl.cfg.SnapshotEvery && seq >= pl.snapRetryAt) {
				data, d := ser.bytes()
				pl.storeSnapshot(seq, data, d)
			}
			select {
			case r := <-pl.stateReqs:
				pend = append(pend, r)
			default:
			}
			continue
		}
		woken := pl.durWait.changed()
		if pl.DurableSeq() >= f.NextSeq() {
			continue
		}
		select {
		case <-pl.stateCtx.Done():
			pl.failPending(pend)
			return
		case <-pl.dead:
			pl.failPending(pend)
			return
		case <-woken:
		case r := <-pl.stateReqs:
			pend = append(pend, r)
		}
	}
}

// answer answers the requests the replica can answer at its seq and
// returns the others.
func (pl *Pipeline) answer(ser *stateSerial, pend []stateReq) []stateReq {
	f := ser.f
	at := f.NextSeq() - 1
	keep := pend[:0]
	for _, r := range pend {
		t0 := time.Now()
		switch {
		case r.kind == reqCheck:
			open, _ := f.proc.UnhaltedViolations()
			r.reply <- stateRes{seq: at, open: open, d: time.Since(t0)}
		case r.seq == at:
			r.reply <- stateRes{seq: at, hash: ser.stateHash(), d: time.Since(t0)}
		case r.seq < at:
			r.reply <- stateRes{seq: at, err: fmt.Errorf("journal: state hash at seq %d: the state follower is past it (at %d)", r.seq, at)}
		default:
			keep = append(keep, r)
		}
	}
	return keep
}

func (pl *Pipeline) failPending(pend []stateReq) {
	for _, r := range pend {
		r.reply <- stateRes{err: ErrStopped}
	}
}

// ask sends r to the state follower and waits for its answer.
func (pl *Pipeline) ask(ctx context.Context, r stateReq) (stateRes, error) {
	r.reply = make(chan stateRes, 1)
	select {
	case pl.stateReqs <- r:
	case <-ctx.Done():
		return stateRes{}, ctx.Err()
	case <-pl.snapDoneCh:
		return stateRes{}, ErrStopped
	}
	select {
	case res := <-r.reply:
		return res, res.err
	case <-ctx.Done():
		return stateRes{}, ctx.Err()
	}
}

// SetStateHashHook makes the state follower hash its replica at every
// multiple of every and call fn with the seq and the hash (on the
// follower's goroutine: fn must not block); every 0 stops it. Replication's
// divergence check (docs/design.md, "Replication"): both nodes hash the same seqs, off the
// acknowledgement path, and none is skipped however fast commands come.
func (pl *Pipeline) SetStateHashHook(every uint64, fn func(seq core.Seq, hash string)) {
	if every == 0 || fn == nil {
		pl.hashHook.Store(nil)
		return
	}
	pl.hashHook.Store(&hashHook{every: every, fn: fn})
}

// StateHashAt returns the state hash at exactly seq, computed on the state
// follower (the processor does not stop): it waits until seq is durable and
// the follower reaches it. A seq the follower has passed is an error.
func (pl *Pipeline) StateHashAt(ctx context.Context, seq core.Seq) (string, error) {
	res, err := pl.ask(ctx, stateReq{kind: reqHash, seq: seq})
	return res.hash, err
}

// checkState runs the full check on the state follower at its seq.
func (pl *Pipeline) checkState(ctx context.Context) (core.Seq, []core.Violation, time.Duration, error) {
	res, err := pl.ask(ctx, stateReq{kind: reqCheck})
	return res.seq, res.open, res.d, err
}

// storeSnapshot writes data, the state at seq serialized in serialize,
// makes it the poison-rebuild base, prunes old snapshots and truncates the
// WAL behind the oldest kept one (never past Config.TruncateLimit).
func (pl *Pipeline) storeSnapshot(seq core.Seq, data []byte, serialize time.Duration) {
	t1 := time.Now()
	if err := pl.snaps.Write(uint64(seq), data); err != nil {
		// Not again after every batch (a full disk): after SnapshotEvery more.
		pl.snapRetryAt = seq + core.Seq(min(pl.cfg.SnapshotEvery, 1<<62))
		pl.log.Error("journal: snapshot write failed", "seq", seq, "err", err, "next_try_seq", pl.snapRetryAt)
		return
	}
	t2 := time.Now()
	pl.lastSnap = seq
	pl.baseSnap.Store(&data)
	pl.state.snapshots.Add(1)
	pl.state.serializeNs.Store(int64(serialize))
	pl.state.writeNs.Store(int64(t2.Sub(t1)))
	pl.state.bytes.Store(int64(len(data)))
	pl.log.Info("journal: snapshot written", "seq", seq, "bytes", len(data), "serialize", serialize, "write", t2.Sub(t1))
	// A downstream consumer (TruncateLimit) pins the newest snapshot at or
	// below its seq and the WAL after that snapshot; 0 means its seq is not
	// known yet (e.g. Postgres unreachable since the start): then nothing is
	// pruned or truncated.
	var pin uint64
	if pl.cfg.TruncateLimit != nil {
		if pin = uint64(pl.cfg.TruncateLimit()); pin == 0 {
			return
		}
	}
	oldest, pinned, err := pl.snaps.PruneKeeping(pl.cfg.KeepSnapshots, pin)
	if err != nil {
		pl.log.Warn("journal: snapshot prune failed", "err", err)
		return
	}
	limit := oldest
	if pin > 0 {
		limit = min(limit, pinned) // 0 if no snapshot <= pin: the consumer needs the WAL from the start
	}
	if pl.rebuilding.Load() {
		return // a poison rebuild may be replaying the WAL from an older base: truncate at the next snapshot
	}
	if t := limit + 1; limit > 0 && t <= pl.wal.LastSeq() {
		// Here, not on the journaler: TruncateFront waits for running WAL
		// iterations (a follower's replay), which must never stall the group commit.
		if err := pl.wal.TruncateFront(t); err != nil {
			pl.log.Warn("journal: front truncation failed", "seq", t, "err", err)
		}
	}
}

// MaxApply is the longest the processor spent on one command since start
// (only with Config.MeasureApply; 0 otherwise).
func (pl *Pipeline) MaxApply() time.Duration { return time.Duration(pl.maxApply.Load()) }
