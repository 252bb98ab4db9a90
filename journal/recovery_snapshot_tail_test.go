package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRecoverRefusesWALBelowSnapshot: a snapshot is written only once its
// seq is durable, so a damaged last entry at or below the newest snapshot is
// bit rot inside fsynced data, not a torn write. Recovery must refuse (naming
// the seq) and leave the files untouched instead of "repairing" acknowledged
// commands away.
func TestRecoverRefusesWALBelowSnapshot(t *testing.T) {
	dir := t.TempDir()
	pl, err := Start(Config{Dir: dir, Logger: quietLog(), TruncateLimit: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	cmds := setupCmds()
	runAll(t, pl, cmds)
	last := pl.DurableSeq()
	if err := pl.Close(); err != nil { // writes the final snapshot at last
		t.Fatal(err)
	}
	segs := walTestSegments(t, filepath.Join(dir, WALDir))
	tail := segs[len(segs)-1]
	frames := walTestFrames(t, tail)
	if len(frames) < 2 {
		t.Fatal("tail segment holds no entry")
	}
	// Flip a payload byte of the last entry: its checksum fails and nothing
	// valid follows, which on its own would be repaired as a torn tail.
	b, err := os.ReadFile(tail)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xFF
	if err := os.WriteFile(tail, b, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err = Recover(RecoverConfig{Dir: dir, Logger: quietLog()})
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Recover = %v, want a *CorruptError", err)
	}
	if uint64(ce.Seq) != uint64(last) {
		t.Fatalf("error names seq %d, want %d: %v", ce.Seq, last, err)
	}
	after, err := os.ReadFile(tail)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, b) {
		t.Fatal("the refused WAL was modified")
	}
	// The read-only path (replay tool) refuses too.
	if _, err := Recover(RecoverConfig{Dir: dir, Logger: quietLog(), ReadOnly: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read-only Recover = %v, want ErrCorrupt", err)
	}
	// Without snapshots the same damage is an ordinary torn tail.
	if err := os.RemoveAll(filepath.Join(dir, SnapshotDir)); err != nil {
		t.Fatal(err)
	}
	rec, err := Recover(RecoverConfig{Dir: dir, Logger: quietLog()})
	if err != nil {
		t.Fatalf("Recover without snapshots: %v", err)
	}
	defer rec.WAL.Close()
	if got := rec.WAL.LastSeq(); got != uint64(last)-1 {
		t.Fatalf("after repair last seq %d, want %d", got, last-1)
	}
}
