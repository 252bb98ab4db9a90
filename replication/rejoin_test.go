package replication_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/replication/natstest"
)

func cmd(who string, seq int) []byte { return []byte(fmt.Sprintf("%s-command-%d", who, seq)) }

// cmds is who's commands from..to.
func cmds(who string, from, to int) [][]byte {
	var out [][]byte
	for s := from; s <= to; s++ {
		out = append(out, cmd(who, s))
	}
	return out
}

// walWith is a WAL in a new data dir holding, from first, the payloads
// given, in segments of 1 KiB.
func walWith(t *testing.T, first int, payloads ...[][]byte) (*journal.WAL, string) {
	t.Helper()
	dir := t.TempDir()
	w, err := journal.Open(filepath.Join(dir, journal.WALDir), journal.Options{NoSync: true, SegmentSize: 1 << 10,
		FirstSeq: uint64(first), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	seq := uint64(first)
	for _, ps := range payloads {
		for _, p := range ps {
			if err := w.AppendBatch([]journal.Entry{{Seq: seq, Payload: p}}); err != nil {
				t.Fatal(err)
			}
			seq++
		}
	}
	return w, dir
}

// The fork point of a fenced primary's WAL: A journaled and stored 1..120,
// journaled 121..150 that never reached the log; B claimed the log after
// 120 and appended 121..200. A's WAL agrees with the log up to 120; after
// discarding its tail there, it is a prefix of the log. A WAL that is a
// prefix, or runs past the log's end without differing, has not diverged;
// one with nothing in common is refused.
func TestForkPoint(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	la, lb := openLog(t, c.URL(), "a"), openLog(t, c.URL(), "b")
	if err := la.Claim(ctx, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= 120; s += 30 { // several records
		if err := la.Append(core.Seq(s), cmds("a", s, s+29)); err != nil {
			t.Fatal(err)
		}
	}
	if err := la.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	sq, _, err := lb.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lb.Claim(ctx, sq, 120, 2); err != nil {
		t.Fatal(err)
	}
	if err := lb.Append(121, cmds("b", 121, 200)); err != nil {
		t.Fatal(err)
	}
	if err := lb.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	lc := openLog(t, c.URL(), "c")

	// A's WAL: its tail 121..150 differs from the log.
	w, dir := walWith(t, 1, cmds("a", 1, 150))
	f, err := replication.ForkPoint(ctx, lc, w)
	if err != nil || f.At != 120 || !f.Diverged() || f.Compared != 120 || f.LogLast != 200 {
		t.Fatalf("A's WAL: %+v, %v", f, err)
	}
	snaps, err := journal.OpenSnapshotStore(filepath.Join(dir, journal.SnapshotDir), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := journal.DiscardAfter(w, snaps, uint64(f.At), quiet()); err != nil {
		t.Fatal(err)
	}
	if f, err = replication.ForkPoint(ctx, lc, w); err != nil || f.At != 120 || f.Diverged() {
		t.Fatalf("A's WAL after the discard: %+v, %v", f, err)
	}
	// The same tail in a WAL whose front was truncated (it starts at 61):
	// compared from its first entry.
	w2, _ := walWith(t, 61, cmds("a", 61, 150))
	if f, err = replication.ForkPoint(ctx, lc, w2); err != nil || f.At != 120 || !f.Diverged() || f.Compared != 60 {
		t.Fatalf("A's truncated WAL: %+v, %v", f, err)
	}
	// A prefix of the log; one running past it; an empty one.
	w3, _ := walWith(t, 1, cmds("a", 1, 90))
	if f, err = replication.ForkPoint(ctx, lc, w3); err != nil || f.At != 90 || f.Diverged() {
		t.Fatalf("a prefix: %+v, %v", f, err)
	}
	w4, _ := walWith(t, 1, cmds("a", 1, 120), cmds("b", 121, 230))
	if f, err = replication.ForkPoint(ctx, lc, w4); err != nil || f.At != 200 || f.Diverged() || f.WALLast != 230 {
		t.Fatalf("past the log's end: %+v, %v", f, err)
	}
	w5, _ := walWith(t, 1)
	if f, err = replication.ForkPoint(ctx, lc, w5); err != nil || f.At != 0 || f.Diverged() {
		t.Fatalf("an empty WAL: %+v, %v", f, err)
	}
	// Differing from its first entry, even seq 1: nothing in common, and
	// nothing may be discarded (a wrong stream, another venue's log).
	w6, _ := walWith(t, 1, cmds("x", 1, 10))
	if f, err = replication.ForkPoint(ctx, lc, w6); !errors.Is(err, replication.ErrNoOverlap) {
		t.Fatalf("differs from seq 1: %+v, %v", f, err)
	}
	// Nothing in common: a WAL after the log's end, or one that differs
	// from its first entry on and does not start at 1.
	w7, _ := walWith(t, 300, cmds("a", 300, 310))
	if f, err = replication.ForkPoint(ctx, lc, w7); !errors.Is(err, replication.ErrNoOverlap) {
		t.Fatalf("a WAL after the log: %+v, %v", f, err)
	}
	w8, _ := walWith(t, 130, cmds("a", 130, 150))
	if f, err = replication.ForkPoint(ctx, lc, w8); !errors.Is(err, replication.ErrNoOverlap) {
		t.Fatalf("a WAL starting inside the divergence: %+v, %v", f, err)
	}

	// On data dirs no process has open: A's (its snapshot above the fork
	// goes with its tail), and one that only runs past the log's end.
	wa, dirA := walWith(t, 1, cmds("a", 1, 150))
	wa.Close()
	snapsA, err := journal.OpenSnapshotStore(filepath.Join(dirA, journal.SnapshotDir), quiet())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []uint64{100, 140} {
		if err := snapsA.Write(s, []byte("state")); err != nil {
			t.Fatal(err)
		}
	}
	opts := journal.Options{NoSync: true, SegmentSize: 1 << 10, Logger: quiet()}
	if f, err = replication.DiscardUnreplicated(ctx, lc, dirA, "", opts); err != nil || f.At != 120 {
		t.Fatalf("DiscardUnreplicated(A): %+v, %v", f, err)
	}
	if l, err := snapsA.List(); err != nil || len(l) != 1 || l[0].Seq != 100 {
		t.Fatalf("A's snapshots after the discard: %+v, %v", l, err)
	}
	ro, err := journal.OpenReadOnly(filepath.Join(dirA, journal.WALDir))
	if err != nil || ro.LastSeq() != 120 {
		t.Fatalf("A's WAL after the discard: %v", err)
	}
	ro.Close()
	wp, dirP := walWith(t, 1, cmds("a", 1, 120), cmds("b", 121, 230))
	wp.Close()
	if f, err = replication.DiscardUnreplicated(ctx, lc, dirP, "", opts); err != nil || f.At != 200 {
		t.Fatalf("DiscardUnreplicated(past the end): %+v, %v", f, err)
	}
	if ro, err = journal.OpenReadOnly(filepath.Join(dirP, journal.WALDir)); err != nil || ro.LastSeq() != 200 {
		t.Fatalf("the WAL past the end after the discard: %v", err)
	}
	ro.Close()
	if f, err = replication.DiscardUnreplicated(ctx, lc, t.TempDir(), "", opts); err != nil || f.At != 0 {
		t.Fatalf("DiscardUnreplicated on an empty data dir: %+v, %v", f, err)
	}
}

// A node's journal is never discarded against a log that cannot be shown
// to be its venue's: an empty log (a new stream, a wrong name, a rebuilt
// cluster), a log claimed by another venue (two venues with the same
// configuration begin with the same commands), or one that differs from
// the WAL's first entry. Each answers an error and leaves the WAL whole.
func TestDiscardUnreplicatedRefusesAnotherLog(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := journal.Options{NoSync: true, SegmentSize: 1 << 10, Logger: quiet()}
	whole := func(dir string) {
		t.Helper()
		w, err := journal.OpenReadOnly(filepath.Join(dir, journal.WALDir))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if w.FirstSeq() != 1 || w.LastSeq() != 150 {
			t.Fatalf("the WAL holds %d..%d, want 1..150 untouched", w.FirstSeq(), w.LastSeq())
		}
	}
	empty := openLog(t, c.URL(), "c")
	w, dir := walWith(t, 1, cmds("a", 1, 150))
	w.Close()
	if _, err := replication.DiscardUnreplicated(ctx, empty, dir, "", opts); !errors.Is(err, replication.ErrNoOverlap) {
		t.Fatalf("an empty log: %v, want ErrNoOverlap", err)
	}
	whole(dir)

	other, err := replication.Open(ctx, replication.Config{URL: c.URL(), Node: "o", Venue: "venue-other", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Claim(ctx, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := other.Append(core.Seq(1), cmds("a", 1, 120)); err != nil { // the same first commands
		t.Fatal(err)
	}
	if err := other.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := replication.DiscardUnreplicated(ctx, other, dir, "venue-mine", opts); !errors.Is(err, replication.ErrForeignLog) {
		t.Fatalf("another venue's log: %v, want ErrForeignLog", err)
	}
	whole(dir)

	w2, dir2 := walWith(t, 1, cmds("x", 1, 150))
	w2.Close()
	if _, err := replication.DiscardUnreplicated(ctx, other, dir2, "venue-other", opts); !errors.Is(err, replication.ErrNoOverlap) {
		t.Fatalf("a log that differs from the first entry: %v, want ErrNoOverlap", err)
	}
	whole(dir2)
}
