package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// Rejoin (issue 38): a fenced or restarted old primary whose WAL holds
// commands the log does not (its unreplicated tail, while another node
// appended other commands at the same seqs) finds where its WAL parts from
// the log (ForkPoint), discards everything after that point
// (journal.DiscardAfter / DiscardDirAfter: snapshots above it, then the
// WAL), rebuilds its processor and views from what remains
// (journal.Start), and follows the log as a standby from the next seq.

// Fork is where a node's WAL parts from the log.
type Fork struct {
	// At is the last seq up to which the WAL and the log agree: every WAL
	// entry from the WAL's first seq to At equals the log's command at
	// that seq (compared byte for byte). Entries after At (if any) are to
	// be discarded before following the log.
	At core.Seq
	// Compared is how many entries were compared.
	Compared uint64
	// WALFirst, WALLast and LogLast are the ranges seen.
	WALFirst, WALLast, LogLast core.Seq
}

// Diverged tells whether the WAL holds entries the log does not agree with
// (ones after At that the log has other commands for). A WAL that merely
// runs past the log's end (commands the log lacks, at seqs it has nothing
// for) has not diverged: a primary claiming the log appends them.
func (f Fork) Diverged() bool { return f.WALLast > f.At && f.LogLast > f.At }

// ErrNoOverlap: the WAL holds entries and none of them can be shown to
// agree with the log (the log is empty or ends before the WAL starts, or
// they differ at the WAL's first entry). Nothing is discarded: a WAL with
// no entry in common with the log may be the only copy of a venue whose
// log was lost, or the node points at the wrong stream; an operator
// decides (the node is set aside, never wiped, and bootstrapped).
var ErrNoOverlap = errors.New("replication: the WAL has no entry in common with the log")

// ErrForeignLog: the log's last claim names another venue than the node's.
var ErrForeignLog = errors.New("replication: the log is another venue's")

var errForkFound = errors.New("fork found")

// ForkPoint compares the WAL w (open, not being appended to) with the log
// from the WAL's first entry on, until the first entry that differs, the
// WAL's end or the log's end (its last record when ForkPoint starts): the
// fork is the entry before the first difference, or the last entry both
// hold. It reads the log's records holding the WAL's range once, and the
// WAL sequentially. All the WAL is compared (not only its tail): an entry
// equal to the log's at the same seq after a fork is possible (two
// primaries may journal identical commands), a whole prefix from the WAL's
// first entry is not. The WAL spans its kept snapshots (SnapshotEvery x
// KeepSnapshots commands), so the cost is reading that much of the log.
func ForkPoint(ctx context.Context, l *Log, w *journal.WAL) (Fork, error) {
	f := Fork{WALFirst: core.Seq(w.FirstSeq()), WALLast: core.Seq(w.LastSeq())}
	tailSq, tail, err := l.Tail(ctx)
	if err != nil {
		return f, err
	}
	if tail != nil {
		f.LogLast = tail.Last()
	}
	f.At = f.WALFirst - 1
	if f.WALLast < f.WALFirst { // an empty WAL agrees with anything
		f.At = f.WALLast
		return f, nil
	}
	if f.LogLast < f.WALFirst { // nothing to compare with (an empty log too)
		return f, fmt.Errorf("%w: the WAL holds %d..%d, the log ends at %d", ErrNoOverlap, f.WALFirst, f.WALLast, f.LogLast)
	}
	end := min(f.WALLast, f.LogLast) // compare up to here
	from, err := l.Seek(ctx, f.WALFirst)
	if err != nil {
		return f, err
	}
	var cur journal.WALCursor
	next := f.WALFirst // the next WAL entry to compare
	stop := func() error { return errForkFound }
	err = l.Follow(ctx, from, func(sq uint64, r Record) error {
		if r.Kind == KindCommands {
			lo := max(r.Seq, next)
			hi := min(r.Last(), end)
			if lo <= hi {
				if lo != next {
					return fmt.Errorf("replication: record %d holds commands %d..%d, expected command %d next (a gap)",
						sq, r.Seq, r.Last(), next)
				}
				var diff bool
				ierr := w.IterateCursor(&cur, uint64(lo), func(seq uint64, p []byte) error {
					s := core.Seq(seq)
					if s > hi {
						return errForkFound // this record's part is done
					}
					if !bytes.Equal(p, r.Commands[s-r.Seq]) {
						diff = true
						return errForkFound
					}
					f.Compared++
					next = s + 1
					return nil
				})
				if ierr != nil && !errors.Is(ierr, errForkFound) {
					return ierr
				}
				if diff {
					return stop()
				}
			}
		}
		if next > end || sq >= tailSq {
			return stop()
		}
		return nil
	})
	if err != nil && !errors.Is(err, errForkFound) {
		return f, fmt.Errorf("replication: fork point: %w", err)
	}
	f.At = next - 1
	if f.Compared == 0 {
		return f, fmt.Errorf("%w: the WAL's first entry %d differs from the log's", ErrNoOverlap, f.WALFirst)
	}
	return f, nil
}

// DiscardUnreplicated prepares the data dir of a node that no process has
// open to follow the log as a standby: it finds the fork point of its WAL
// (ForkPoint, on the WAL opened read-only) and, if the WAL holds anything
// after it — commands the log has others for, or commands past the log's
// end, which the writer of the log never had — discards them with their
// snapshots (journal.DiscardDirAfter). journal.Start then rebuilds the
// processor and views from what remains, and the standby follows the log
// from the next seq.
//
// Only for a node that will follow: a node that is about to claim the log
// itself keeps the commands past the log's end and appends them (they may
// have been acknowledged in async mode). In sync mode nothing past the
// log's end was acknowledged. venue is the node's own (its data dir's
// WAL id): the log's last claim must name it, or nothing is discarded
// (ErrForeignLog; two venues with the same configuration start with the
// same commands, so agreement on a prefix proves nothing). ErrNoOverlap,
// ErrForeignLog, journal.ErrNoBase: nothing changed; the node is set
// aside and bootstrapped by an operator's decision.
func DiscardUnreplicated(ctx context.Context, l *Log, dataDir, venue string, opts journal.Options) (Fork, error) {
	walDir := filepath.Join(dataDir, journal.WALDir)
	if _, err := os.Stat(walDir); errors.Is(err, os.ErrNotExist) {
		return Fork{}, nil // nothing journaled
	}
	claim, err := l.LastEpoch(ctx)
	if err != nil {
		return Fork{}, err
	}
	if claim == nil {
		return Fork{}, fmt.Errorf("%w: the log holds no claim", ErrNoOverlap)
	}
	if claim.Venue != venue {
		return Fork{}, fmt.Errorf("%w: its claim names venue %q, this node is %q", ErrForeignLog, claim.Venue, venue)
	}
	w, err := journal.OpenReadOnly(walDir)
	if err != nil {
		return Fork{}, err
	}
	f, err := ForkPoint(ctx, l, w)
	w.Close()
	if err != nil || f.WALLast <= f.At {
		return f, err
	}
	l.log.Warn("replication: discarding this node's journal past the log's agreement point before following",
		"agreed_up_to", f.At, "wal_last", f.WALLast, "log_last", f.LogLast, "diverged", f.Diverged())
	return f, journal.DiscardDirAfter(dataDir, uint64(f.At), opts)
}
