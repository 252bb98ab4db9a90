package bench

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// The replay scenario measures a restart: journal.Recover on a data dir
// holding a snapshot after the workload's setup (seq S) and a WAL of N more
// steady commands, so the restart loads the snapshot, replays N commands and
// runs the full invariant check, as the exchange does before it accepts
// traffic. The dir is written directly (core + WAL + snapshot store, no
// pipeline, no fsync), so preparing it costs little next to the measurement.

// replayAppendBatch is how many commands go into one WAL AppendBatch while
// the dir is prepared.
const replayAppendBatch = 4_096

// ReplayConfig configures the replay scenario.
type ReplayConfig struct {
	Dir      string // empty data dir to prepare and recover
	Commands int    // steady commands in the WAL after the snapshot, >= 1
	Seed     uint64
	Workload Options
}

// ReplayResult is the scenario's outcome; its JSON form is the report.
type ReplayResult struct {
	SnapshotSeq   core.Seq `json:"snapshot_seq"`
	SnapshotBytes int      `json:"snapshot_bytes"`
	Commands      uint64   `json:"commands"`          // replayed from the WAL
	SnapshotLoadS float64  `json:"snapshot_load_s"`   // Recover with nothing to replay (snapshot + invariant check)
	RestartS      float64  `json:"restart_s"`         // Recover of the whole dir
	CmdsPerSec    float64  `json:"cmds_per_sec"`      // Commands / RestartS
	ReplayPerSec  float64  `json:"replay_cmds_per_s"` // Commands / (RestartS - SnapshotLoadS)
	Target        float64  `json:"target_cmds_per_sec"`
	Ratio         float64  `json:"ratio"` // CmdsPerSec / Target
	StateHash     string   `json:"state_hash"`
}

// RunReplay prepares cfg.Dir and measures the restart.
func RunReplay(cfg ReplayConfig) (ReplayResult, error) {
	if cfg.Dir == "" || cfg.Commands < 1 {
		return ReplayResult{}, errors.New("bench: replay needs a data dir and commands >= 1")
	}
	w, err := NewWorkload(cfg.Seed, cfg.Workload)
	if err != nil {
		return ReplayResult{}, err
	}
	snapSeq, snapBytes, err := prepareReplayDir(cfg.Dir, w, cfg.Commands)
	if err != nil {
		return ReplayResult{}, err
	}
	recover := func(upTo core.Seq) (*journal.Recovered, time.Duration, error) {
		t0 := time.Now()
		rec, err := journal.Recover(journal.RecoverConfig{Dir: cfg.Dir, ReadOnly: true, UpTo: upTo,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		d := time.Since(t0)
		if err != nil {
			return nil, 0, err
		}
		return rec, d, rec.WAL.Close()
	}
	_, load, err := recover(snapSeq)
	if err != nil {
		return ReplayResult{}, err
	}
	rec, total, err := recover(0)
	if err != nil {
		return ReplayResult{}, err
	}
	if rec.SnapshotSeq != snapSeq || rec.Replayed != uint64(cfg.Commands) {
		return ReplayResult{}, errors.New("bench: replay did not start from the prepared snapshot")
	}
	rate := float64(rec.Replayed) / total.Seconds()
	return ReplayResult{SnapshotSeq: snapSeq, SnapshotBytes: snapBytes, Commands: rec.Replayed,
		SnapshotLoadS: math.Round(load.Seconds()*1e4) / 1e4, RestartS: math.Round(total.Seconds()*1e4) / 1e4,
		CmdsPerSec:   math.Round(rate),
		ReplayPerSec: math.Round(float64(rec.Replayed) / max(total-load, time.Microsecond).Seconds()),
		Target:       ProcessorTarget, Ratio: roundSig3(rate / ProcessorTarget), StateHash: rec.StateHash}, nil
}

// prepareReplayDir writes the setup and n steady commands to a WAL in dir,
// and the state after the setup as a snapshot; it returns the snapshot's
// seq and size.
func prepareReplayDir(dir string, w *Workload, n int) (core.Seq, int, error) {
	wal, err := journal.Open(filepath.Join(dir, journal.WALDir), journal.Options{NoSync: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return 0, 0, err
	}
	p := core.New(core.Config{})
	setup := core.Seq(w.SetupLen())
	var (
		entries []journal.Entry
		arena   []byte
		c       core.Command
	)
	flush := func() error {
		err := wal.AppendBatch(entries)
		entries, arena = entries[:0], arena[:0]
		return err
	}
	last := setup + core.Seq(n)
	for seq := firstSeq; seq <= last; seq++ {
		w.Fill(seq, &c)
		c.Seq, c.Time = seq, DefaultTime
		off := len(arena)
		arena = core.EncodeCommand(arena, &c)
		entries = append(entries, journal.Entry{Seq: uint64(seq), Payload: arena[off:len(arena):len(arena)]})
		if seq <= setup {
			p.Apply(&c)
		}
		if len(entries) == replayAppendBatch || seq == setup || seq == last {
			if err := flush(); err != nil {
				return 0, 0, errors.Join(err, wal.Close())
			}
		}
	}
	if err := wal.Close(); err != nil {
		return 0, 0, err
	}
	snaps, err := journal.OpenSnapshotStore(filepath.Join(dir, journal.SnapshotDir),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return 0, 0, err
	}
	snap := p.AppendSnapshot(nil)
	return setup, len(snap), snaps.Write(uint64(setup), snap)
}
