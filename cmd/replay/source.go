package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// segmentNameLen: tidwall names each segment by the seq of its first entry,
// as 20 decimal digits.
const segmentNameLen = 20

// walInfo describes the WAL directory from its file names and sizes only.
type walInfo struct {
	segments int
	bytes    int64  // total size of the segment files
	firstSeq uint64 // first segment's name (the WAL's first seq); 0 if no segment
}

func statWAL(dir string) (walInfo, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return walInfo{}, fmt.Errorf("no WAL: %w", err)
	}
	var wi walInfo
	for _, de := range des {
		n := de.Name()
		if de.IsDir() || len(n) != segmentNameLen {
			continue
		}
		seq, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			return walInfo{}, err
		}
		wi.segments++
		wi.bytes += fi.Size()
		if wi.firstSeq == 0 || seq < wi.firstSeq {
			wi.firstSeq = seq
		}
	}
	return wi, nil
}

// replayed is the outcome of replayData.
type replayed struct {
	rec        *journal.Recovered // rec.WAL is open: the caller closes it
	wal        walInfo
	elapsed    time.Duration
	fromSeq    core.Seq // first seq replayed (the snapshot's seq + 1)
	violations int      // INVARIANT_VIOLATION and CORE_HALTED events seen during replay
}

// replayData rebuilds the state in o.data up to o.to, read-only, calling on
// (if set) for every replayed command. With fromScratch it replays from seq 1
// whenever the WAL still starts there; otherwise it starts from the newest
// snapshot at or below o.to.
func replayData(o *opts, e env, fromScratch bool, on func(*core.Command, []core.Event)) (*replayed, error) {
	walDir := filepath.Join(o.data, journal.WALDir)
	if _, err := os.Stat(walDir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s holds no WAL (no %s directory)", o.data, journal.WALDir)
	}
	wi, err := statWAL(walDir)
	if err != nil {
		return nil, err
	}
	out := &replayed{wal: wi}
	prog := startProgress(e, o, total(o, e, walDir))
	rc := journal.RecoverConfig{
		Dir:             o.data,
		ReadOnly:        true,
		IgnoreSnapshots: fromScratch && wi.firstSeq <= 1,
		UpTo:            seqOf(o.to),
		Logger:          warnLogger(e.stderr),
		OnCommand: func(c *core.Command, evs []core.Event) {
			if c.Seq%progressEvery == 0 {
				prog.seq.Store(uint64(c.Seq))
			}
			if out.fromSeq == 0 {
				out.fromSeq = c.Seq
			}
			for i := range evs {
				if k := evs[i].Kind; k == core.EvInvariantViolation || k == core.EvCoreHalted {
					out.violations++
				}
			}
			if on != nil {
				on(c, evs)
			}
		},
	}
	start := time.Now()
	rec, err := journal.Recover(rc)
	out.elapsed = time.Since(start)
	prog.finish()
	if err != nil {
		return nil, err
	}
	out.rec = rec
	if out.fromSeq == 0 {
		out.fromSeq = rec.Proc.LastSeq() + 1
	}
	if t := rec.WAL.TornTail(); t != nil {
		fmt.Fprintf(e.stderr, "replay: warning: %v (not a failure: replay stops at the last whole entry; "+
			"the journal truncates the tail at start)\n", t)
	}
	if o.to != 0 && rec.Proc.LastSeq() < seqOf(o.to) {
		fmt.Fprintf(e.stderr, "replay: warning: --to %d is past the last seq in the WAL (%d)\n", o.to, rec.Proc.LastSeq())
	}
	return out, nil
}

// total is the progress bar's end: --to, or the WAL's last seq when a bar
// is drawn (that costs a verification pass, so only for a terminal).
func total(o *opts, e env, walDir string) uint64 {
	if o.to != 0 || o.quiet || !e.tty {
		return o.to
	}
	w, err := journal.OpenReadOnly(walDir)
	if err != nil {
		return 0 // Recover reports it
	}
	defer w.Close()
	return w.LastSeq()
}
