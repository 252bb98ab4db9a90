package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

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
	SnapshotSeq core.Seq          // seq covered by the snapshot used (0 = none)
	Replayed    uint64            // commands replayed from the WAL
	Poisoned    map[core.Seq]bool // poison commands found (rejected with POISON_COMMAND)
	StateHash   string
}

// Recover rebuilds the core from the latest valid snapshot plus the WAL after
// it, then runs the full invariant check; only then may traffic be accepted.
// A torn WAL tail is repaired (unless ReadOnly); corruption anywhere else, a
// gap between snapshot and WAL, or a broken invariant is an error.
func Recover(rc RecoverConfig) (*Recovered, error) {
	if rc.Logger == nil {
		rc.Logger = slog.Default()
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
	out := &Recovered{WAL: w, Snapshots: snaps, Poisoned: map[core.Seq]bool{}}
	upTo := rc.UpTo
	if upTo == 0 || upTo > core.Seq(w.LastSeq()) {
		upTo = core.Seq(w.LastSeq())
	}
	var emitted core.Seq
	for {
		proc, snapSeq, err := loadBase(snaps, w, rc, upTo)
		if err != nil {
			w.Close()
			return nil, err
		}
		out.SnapshotSeq = snapSeq
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
			rc.Logger.Error("journal: poison command in WAL; rebuilding without it", "seq", pe.seq, "panic", pe.cause)
			out.Poisoned[pe.seq] = true
			continue
		}
		if perr != nil {
			w.Close()
			return nil, perr
		}
		out.Proc, out.Replayed = proc, n
		break
	}
	open, contained := out.Proc.UnhaltedViolations()
	if len(open) != 0 {
		w.Close()
		return nil, fmt.Errorf("journal: invariants broken after recovery at seq %d: %+v", out.Proc.LastSeq(), open)
	}
	if len(contained) != 0 {
		logging.Critical(context.Background(), rc.Logger, "journal: recovered state holds invariant violations in halted markets; operator action needed",
			"violations", fmt.Sprintf("%+v", contained), "core_halted", out.Proc.Halted())
	}
	out.StateHash = out.Proc.StateHash()
	rc.Logger.Info("journal: recovered", "seq", out.Proc.LastSeq(), "snapshot_seq", out.SnapshotSeq,
		"replayed", out.Replayed, "state_hash", out.StateHash)
	return out, nil
}

// loadBase returns the processor to replay onto: the newest valid snapshot
// at or below upTo, or an empty processor.
func loadBase(snaps *SnapshotStore, w *WAL, rc RecoverConfig, upTo core.Seq) (*core.Processor, core.Seq, error) {
	if !rc.IgnoreSnapshots {
		seq, data, err := latestAtOrBelow(snaps, uint64(upTo), rc.Logger)
		switch {
		case err == nil:
			proc, rerr := core.Restore(rc.Core, data)
			if rerr != nil {
				return nil, 0, fmt.Errorf("journal: snapshot at seq %d: %w", seq, rerr)
			}
			if core.Seq(seq) != proc.LastSeq() {
				return nil, 0, fmt.Errorf("journal: snapshot file seq %d holds state at seq %d", seq, proc.LastSeq())
			}
			if w.LastSeq() > seq && w.FirstSeq() > seq+1 {
				return nil, 0, fmt.Errorf("journal: gap between snapshot seq %d and WAL first seq %d", seq, w.FirstSeq())
			}
			return proc, core.Seq(seq), nil
		case !errors.Is(err, ErrNoSnapshot):
			return nil, 0, err
		}
	}
	if w.LastSeq() > 0 && w.FirstSeq() > 1 {
		return nil, 0, fmt.Errorf("journal: WAL starts at seq %d and no usable snapshot covers the gap", w.FirstSeq())
	}
	return core.New(rc.Core), 0, nil
}

type poisonError struct {
	seq   core.Seq
	cause any
}

func (e *poisonError) Error() string { return fmt.Sprintf("journal: poison command at seq %d", e.seq) }

var errStop = errors.New("stop")

// replay applies WAL entries after proc.LastSeq() up to upTo. Known poison
// seqs are skipped (rejected); a new panic returns a *poisonError.
func replay(proc *core.Processor, w *WAL, upTo core.Seq, poisoned map[core.Seq]bool,
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
				return fmt.Errorf("journal: undecodable command at seq %d: %w", seq, err)
			}
			if uint64(c.Seq) != seq {
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
			b.cmds, b.err = b.cmds[:len(b.cmds)-1], err
		}
		send()
	}()
	return out, quit, done
}

// applyBatch applies cmds in order (known poison seqs are skipped: rejected
// with POISON_COMMAND), calling on after each, and returns how many were
// applied. A panic inside Apply stops it with a *poisonError for that
// command; a panic anywhere else (on, Skip) is not a poison command and
// propagates. One deferred recover covers the whole batch.
func applyBatch(proc *core.Processor, cmds []core.Command, poisoned map[core.Seq]bool,
	on func(c *core.Command, evs []core.Event)) (n uint64, perr *poisonError) {
	applying := false
	defer func() {
		if !applying {
			return // no recover: the panic goes on
		}
		if r := recover(); r != nil {
			perr = &poisonError{seq: cmds[n].Seq, cause: r}
		}
	}()
	for i := range cmds {
		c := &cmds[i]
		var evs []core.Event
		if len(poisoned) != 0 && poisoned[c.Seq] {
			evs = proc.Skip(c, core.CodePoisonCommand)
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
func rebuild(base []byte, w *WAL, cfg core.Config, upTo core.Seq, poisoned map[core.Seq]bool) (*core.Processor, error) {
	for {
		proc, err := core.Restore(cfg, base)
		if err != nil {
			return nil, fmt.Errorf("journal: rebuild base: %w", err)
		}
		_, err = replay(proc, w, upTo, poisoned, nil)
		var pe *poisonError
		if errors.As(err, &pe) {
			poisoned[pe.seq] = true
			continue
		}
		return proc, err
	}
}

// latestAtOrBelow returns the newest verified snapshot with seq <= upTo;
// damaged ones are skipped with a warning.
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
		if !errors.Is(err, ErrCorrupt) {
			return 0, nil, err
		}
		log.Warn("journal: skipping damaged snapshot", "seq", infos[i].Seq, "err", err)
	}
	return 0, nil, ErrNoSnapshot
}
