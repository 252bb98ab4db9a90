package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/logging"
)

// Sub-directories of a data dir.
const (
	WALDir      = "wal"
	SnapshotDir = "snapshots"
)

// RecoverConfig configures Recover.
type RecoverConfig struct {
	Dir             string
	SegmentSize     int
	NoSync          bool
	ReadOnly        bool     // verify only: open the WAL read-only (no tail repair, no writes)
	IgnoreSnapshots bool     // replay the whole WAL from seq 1 (needs an untruncated WAL)
	UpTo            core.Seq // stop after this seq (0 = everything)
	Core            core.Config
	Logger          *slog.Logger
	// OnCommand, if set, sees every replayed command and its events once,
	// in seq order (commands covered by the snapshot are not seen).
	OnCommand func(c *core.Command, evs []core.Event)
}

// Recovered is the outcome of Recover.
type Recovered struct {
	Proc        *core.Processor
	WAL         *WAL
	Snapshots   *SnapshotStore
	SnapshotSeq core.Seq                   // seq covered by the snapshot used (0 = none)
	Replayed    uint64                     // commands replayed from the WAL
	Poisoned    map[core.Seq]core.Rollback // commands discarded instead of applied (poison, or a failed per-command check)
	StateHash   string
	// State is the recovered state's canonical serialization (what
	// StateHash hashes): the base Pipeline restores its replicas from.
	State []byte
	// Open are the violations of the recovered state that nothing halts yet
	// (the base and the WAL reproduce them): the caller starts each such
	// market HALTED, or the core for balance-level ones, with reason
	// RECOVERY_FAILED (Pipeline does, through the ring). Contained are those
	// already halted. Both are logged.
	Open, Contained []core.Violation
	// Skipped says why each newer base was not used (a snapshot that failed
	// its checksum, did not decode, or broke invariants), newest first.
	Skipped []string
	// Duration is the whole recovery; MarketCheck how long each market's
	// verification took (the per-market part of a recovery that rebuilds the
	// whole core at once from snapshot + WAL).
	Duration    time.Duration
	MarketCheck map[core.MarketID]time.Duration
}

// Recover rebuilds the core from the newest usable base plus the WAL after
// it, then runs the full invariant check; only then may traffic be accepted.
// A base is usable when it verifies (checksum), decodes, the WAL continues
// it and it breaks no invariant nothing halts: a snapshot failing any of
// these is skipped for the previous one (the reason logged), and without
// one the WAL is replayed from its start if it still begins at seq 1. Only
// when nothing else is left is a snapshot that breaks invariants used. A
// recovered state that breaks invariants does not stop the start: Open says
// what to halt. A torn WAL tail is repaired (unless ReadOnly); corruption
// anywhere else, or no base at all for a truncated WAL, is an error.
func Recover(rc RecoverConfig) (*Recovered, error) {
	start := time.Now()
	if rc.Logger == nil {
		rc.Logger = slog.Default()
	}
	if faultsMarked(rc.Dir) {
		rc.Core.AllowFaults = true // its WAL may hold acknowledged faults: replay them as applied (FaultsMarker)
	}
	snaps, err := OpenSnapshotStore(filepath.Join(rc.Dir, SnapshotDir), rc.Logger)
	if err != nil {
		return nil, err
	}
	// newest is the seq of the newest snapshot on disk (valid or not): it
	// was written only after its seq was durable in the WAL.
	var newest uint64
	if !rc.IgnoreSnapshots {
		infos, lerr := snaps.List()
		if lerr != nil {
			return nil, lerr
		}
		if len(infos) > 0 {
			newest = infos[len(infos)-1].Seq
		}
	}
	var w *WAL
	walPath := filepath.Join(rc.Dir, WALDir)
	if rc.ReadOnly {
		w, err = OpenReadOnly(walPath)
	} else {
		// A fresh WAL dir beside a snapshot at S must start at S+1 (FirstSeq
		// is ignored for a WAL that already has segments).
		first := uint64(1)
		if newest > 0 {
			first = newest + 1
		}
		w, err = Open(walPath, Options{SegmentSize: rc.SegmentSize, NoSync: rc.NoSync, Logger: rc.Logger,
			FirstSeq: first, MinLastSeq: newest})
	}
	if err != nil {
		return nil, err
	}
	if newest > w.LastSeq() {
		// Snapshots are written only once their seq is durable, so the WAL
		// must reach the newest one (ReadOnly path; Open refuses itself).
		w.Close()
		return nil, &CorruptError{Seq: w.LastSeq() + 1, Segment: walPath,
			Reason: fmt.Sprintf("the WAL ends at seq %d but a snapshot covers seq %d: durable entries are missing", w.LastSeq(), newest)}
	}
	out := &Recovered{WAL: w, Snapshots: snaps, Poisoned: map[core.Seq]core.Rollback{}}
	upTo := rc.UpTo
	if upTo == 0 || upTo > core.Seq(w.LastSeq()) {
		upTo = core.Seq(w.LastSeq())
	}
	var emitted core.Seq
	for {
		tb := time.Now()
		proc, snapSeq, baseData, skipped, err := loadBase(snaps, w, rc, upTo)
		if err != nil {
			w.Close()
			return nil, err
		}
		out.SnapshotSeq, out.Skipped = snapSeq, skipped
		rc.Logger.Info("journal: recovery: base loaded", "snapshot_seq", snapSeq, "took", time.Since(tb),
			"replaying_to", upTo) // start-up progress (issue 39)
		if emitted < snapSeq {
			emitted = snapSeq
		}
		n, perr := replay(proc, w, upTo, out.Poisoned, func(c *core.Command, evs []core.Event) {
			if rc.OnCommand != nil && c.Seq > emitted {
				rc.OnCommand(c, evs)
				emitted = c.Seq
			}
		})
		var pe *poisonError
		if errors.As(perr, &pe) {
			rc.Logger.Warn("journal: replay discards a command (the live run discarded it too); rebuilding without it",
				"seq", pe.seq, "reason", pe.rb.Reason.String(), "market", pe.rb.Market, "panic", fmt.Sprint(pe.cause))
			out.Poisoned[pe.seq] = pe.rb
			continue
		}
		if perr != nil {
			w.Close()
			return nil, perr
		}
		out.Proc, out.Replayed = proc, n
		if n == 0 && len(out.Poisoned) == 0 && len(baseData) > 0 && baseData[0] == core.SnapshotVersion {
			// Nothing replayed onto a base of this version: its bytes are
			// the state's serialization (a restored state serializes to
			// them: core's property tests; TestRecoverKeepsTheBaseBytes), so
			// the replicas restore from them without serializing again.
			out.State = baseData
		}
		rc.Logger.Info("journal: recovery: WAL replayed; full check next", "replayed", n, "took", time.Since(tb))
		break
	}
	out.MarketCheck = map[core.MarketID]time.Duration{}
	t0 := time.Now()
	all := out.Proc.CheckInvariantsEach(func(id core.MarketID) {
		now := time.Now()
		out.MarketCheck[id] = now.Sub(t0)
		t0 = now
	})
	out.Open, out.Contained = out.Proc.SplitViolations(all)
	if len(out.Open) != 0 {
		logging.Critical(context.Background(), rc.Logger, "journal: the recovered state breaks invariants; what broke starts HALTED (RECOVERY_FAILED), the rest serves",
			"seq", out.Proc.LastSeq(), "violations", describeViolations(out.Open), "skipped_bases", out.Skipped)
	}
	if len(out.Contained) != 0 {
		logging.Critical(context.Background(), rc.Logger, "journal: recovered state holds invariant violations under halts in force; operator action needed",
			"violations", describeViolations(out.Contained), "core_halted", out.Proc.Halted())
	}
	if out.State == nil {
		out.State = out.Proc.AppendSnapshot(nil)
	}
	out.StateHash = core.StateHashOf(out.State)
	out.Duration = time.Since(start)
	rc.Logger.Info("journal: recovered", "seq", out.Proc.LastSeq(), "snapshot_seq", out.SnapshotSeq,
		"replayed", out.Replayed, "state_hash", out.StateHash, "duration", out.Duration.String())
	return out, nil
}

// describeViolations renders violations for a log line or a breaker's
// context: market (0 = balance level), asset, what broke, the reason.
func describeViolations(vs []core.Violation) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{market:%d asset:%d detail:%s reason:%s}", v.Market, v.Asset, core.ViolName(v.Detail), v.Reason)
	}
	return b.String()
}

// loadBase returns the processor to replay onto (see Recover for the order
// of preference) and why newer bases were skipped.
func loadBase(snaps *SnapshotStore, w *WAL, rc RecoverConfig, upTo core.Seq) (*core.Processor, core.Seq, []byte, []string, error) {
	var skipped []string
	skip := func(seq uint64, why string) {
		skipped = append(skipped, fmt.Sprintf("snapshot %d: %s", seq, why))
		rc.Logger.Warn("journal: snapshot not used as the recovery base; trying the previous one", "seq", seq, "reason", why)
	}
	var lastResort *core.Processor
	var lastResortSeq uint64
	if !rc.IgnoreSnapshots {
		infos, err := snaps.List()
		if err != nil {
			return nil, 0, nil, nil, err
		}
		for i := len(infos) - 1; i >= 0; i-- {
			seq := infos[i].Seq
			if seq > uint64(upTo) {
				continue
			}
			data, err := snaps.Load(seq)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					return nil, 0, nil, nil, err
				}
				skip(seq, err.Error())
				continue
			}
			proc, err := core.Restore(rc.Core, data)
			switch {
			case err != nil:
				skip(seq, "does not decode: "+err.Error())
				continue
			case uint64(proc.LastSeq()) != seq:
				skip(seq, fmt.Sprintf("holds the state at seq %d", proc.LastSeq()))
				continue
			case w.LastSeq() > seq && w.FirstSeq() > seq+1:
				skip(seq, fmt.Sprintf("the WAL continues only from seq %d", w.FirstSeq()))
				continue
			}
			if open, _ := proc.UnhaltedViolations(); len(open) != 0 {
				skip(seq, "breaks invariants: "+describeViolations(open))
				if lastResort == nil {
					lastResort, lastResortSeq = proc, seq
				}
				continue
			}
			return proc, core.Seq(seq), data, skipped, nil
		}
	}
	if w.LastSeq() == 0 || w.FirstSeq() <= 1 {
		if len(skipped) > 0 {
			rc.Logger.Warn("journal: replaying the whole WAL from seq 1 (no usable snapshot)", "skipped", len(skipped))
		}
		return core.New(rc.Core), 0, nil, skipped, nil
	}
	if lastResort != nil {
		rc.Logger.Warn("journal: the WAL no longer starts at seq 1; recovering from a snapshot that breaks invariants",
			"seq", lastResortSeq)
		return lastResort, core.Seq(lastResortSeq), nil, skipped, nil
	}
	return nil, 0, nil, skipped, fmt.Errorf("journal: WAL starts at seq %d and no usable snapshot covers the gap (%s)",
		w.FirstSeq(), strings.Join(skipped, "; "))
}

type poisonError struct {
	seq   core.Seq
	rb    core.Rollback
	cause any
}

func (e *poisonError) Error() string { return fmt.Sprintf("journal: poison command at seq %d", e.seq) }

var errStop = errors.New("stop")

// replay applies WAL entries after proc.LastSeq() up to upTo. Known
// discarded seqs are discarded again; a new panic returns a *poisonError.
func replay(proc *core.Processor, w *WAL, upTo core.Seq, poisoned map[core.Seq]core.Rollback,
	on func(c *core.Command, evs []core.Event)) (uint64, error) {
	from := proc.LastSeq() + 1
	if from > upTo {
		return 0, nil
	}
	batches, quit, done := decodeAhead(w, from, upTo)
	defer func() {
		close(quit)
		for range batches { // let the decoder finish and exit
		}
	}()
	var n uint64
	for b := range batches {
		if b.err != nil {
			return n, b.err
		}
		k, perr := applyBatch(proc, b.cmds, poisoned, on)
		n += k
		if perr != nil {
			return n, perr
		}
		done <- b
	}
	if proc.LastSeq() != upTo {
		return n, fmt.Errorf("journal: replay ended at seq %d, expected %d", proc.LastSeq(), upTo)
	}
	return n, nil
}

// replayBatch is a run of decoded commands handed from the decoder to the applier.
type replayBatch struct {
	cmds []core.Command
	err  error
}

// Replay pipeline limits: decoding (read, CRC, varints) runs on its own
// goroutine, a few batches ahead of the applier.
const (
	replayBatchSize = 1024
	replayBatches   = 4
)

// decodeAhead reads and decodes WAL entries [from, upTo] on a goroutine and
// sends them in batches; the consumer returns each batch on done for reuse
// and closes quit to stop early. The batches channel is closed at the end.
func decodeAhead(w *WAL, from, upTo core.Seq) (<-chan *replayBatch, chan struct{}, chan *replayBatch) {
	out := make(chan *replayBatch, replayBatches)
	done := make(chan *replayBatch, replayBatches)
	quit := make(chan struct{})
	for i := 0; i < replayBatches; i++ {
		done <- &replayBatch{cmds: make([]core.Command, 0, replayBatchSize)}
	}
	go func() {
		defer close(out)
		var b *replayBatch
		take := func() bool {
			select {
			case b = <-done:
				b.cmds = b.cmds[:0]
				return true
			case <-quit:
				return false
			}
		}
		send := func() bool {
			select {
			case out <- b:
				b = nil
				return true
			case <-quit:
				return false
			}
		}
		if !take() {
			return
		}
		err := w.Iterate(uint64(from), func(seq uint64, payload []byte) error {
			b.cmds = append(b.cmds, core.Command{})
			c := &b.cmds[len(b.cmds)-1]
			if err := core.DecodeCommand(payload, c); err != nil {
				b.cmds = b.cmds[:len(b.cmds)-1]
				return fmt.Errorf("journal: undecodable command at seq %d: %w", seq, err)
			}
			if uint64(c.Seq) != seq {
				b.cmds = b.cmds[:len(b.cmds)-1]
				return fmt.Errorf("journal: entry at seq %d carries command seq %d", seq, c.Seq)
			}
			if c.Seq >= upTo {
				return errStop
			}
			if len(b.cmds) == replayBatchSize && (!send() || !take()) {
				return errStop
			}
			return nil
		})
		if b == nil {
			return // quit
		}
		if err != nil && !errors.Is(err, errStop) {
			b.err = err // also an error of Iterate itself (the WAL no longer holds from), with no command taken
		}
		send()
	}()
	return out, quit, done
}

// applyBatch applies cmds in order (known discarded seqs are discarded
// again: core.Processor.Discard), calling on after each, and returns how
// many were applied. A panic inside Apply (a poison command, or a failed
// per-command check's *core.Rollback) stops it with a *poisonError for that
// command; a panic anywhere else (on, Discard) propagates. One deferred recover covers the whole batch.
func applyBatch(proc *core.Processor, cmds []core.Command, poisoned map[core.Seq]core.Rollback,
	on func(c *core.Command, evs []core.Event)) (n uint64, perr *poisonError) {
	applying := false
	defer func() {
		if !applying {
			return // no recover: the panic goes on
		}
		if r := recover(); r != nil {
			perr = &poisonError{seq: cmds[n].Seq, rb: core.AsRollback(r), cause: r}
		}
	}()
	for i := range cmds {
		c := &cmds[i]
		var evs []core.Event
		if rb, known := poisoned[c.Seq]; known {
			evs = proc.Discard(c, rb)
		} else {
			applying = true
			evs = proc.Apply(c)
			applying = false
		}
		n++
		if on != nil {
			on(c, evs)
		}
	}
	return n, nil
}

// rebuild returns a fresh processor at seq upTo from base (a serialized
// state the pipeline holds in memory: the recovered state or the last
// snapshot it handed to the writer) plus the WAL after it. It never reads the
// snapshot directory, which the snapshot writer prunes concurrently; the WAL
// after base is always present because front truncation never passes the
// oldest snapshot on disk, which is at or below base.
func rebuild(base []byte, w *WAL, cfg core.Config, upTo core.Seq, poisoned map[core.Seq]core.Rollback) (*core.Processor, error) {
	for {
		proc, err := core.Restore(cfg, base)
		if err != nil {
			return nil, fmt.Errorf("journal: rebuild base: %w", err)
		}
		if proc.LastSeq() > upTo {
			return nil, fmt.Errorf("%w: the base is at seq %d, the rebuild goes to %d", errBaseAhead, proc.LastSeq(), upTo)
		}
		_, err = replay(proc, w, upTo, poisoned, nil)
		var pe *poisonError
		if errors.As(err, &pe) {
			poisoned[pe.seq] = pe.rb
			continue
		}
		return proc, err
	}
}

// errBaseAhead: a rebuild's base is past the seq it must rebuild to (the
// state follower, reading durable commands, may snapshot past a command the
// processor is still applying).
var errBaseAhead = errors.New("journal: rebuild base past its target")

// latestAtOrBelow returns the newest verified snapshot with seq <= upTo;
// damaged ones are skipped with a warning, and one removed since the
// listing (pruned meanwhile) is passed over for the one before.
func latestAtOrBelow(snaps *SnapshotStore, upTo uint64, log *slog.Logger) (uint64, []byte, error) {
	infos, err := snaps.List()
	if err != nil {
		return 0, nil, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		if infos[i].Seq > upTo {
			continue
		}
		data, err := snaps.Load(infos[i].Seq)
		if err == nil {
			return infos[i].Seq, data, nil
		}
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			return 0, nil, err
		}
		log.Warn("journal: skipping damaged snapshot", "seq", infos[i].Seq, "err", err)
	}
	return 0, nil, ErrNoSnapshot
}
