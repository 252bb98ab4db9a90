package journal

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func snapTestOpen(t *testing.T, dir string) (*SnapshotStore, *walLogBuf) {
	t.Helper()
	logs := &walLogBuf{}
	s, err := OpenSnapshotStore(dir, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

func snapTestData(seq uint64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("state@%d;", seq)), int(seq%50)+1)
}

func TestSnapshotStoreWriteLatestPrune(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snaps")
	s, _ := snapTestOpen(t, dir)
	if _, _, err := s.Latest(); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("empty store: %v", err)
	}
	if _, ok := s.OldestSeq(); ok {
		t.Fatal("empty store has an oldest snapshot")
	}
	if _, err := s.Prune(1); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("Prune on empty store: %v", err)
	}
	for _, seq := range []uint64{100, 2000, 300, 0} { // order of writes does not matter
		if err := s.Write(seq, snapTestData(seq)); err != nil {
			t.Fatal(err)
		}
	}
	seq, data, err := s.Latest()
	if err != nil || seq != 2000 || !bytes.Equal(data, snapTestData(2000)) {
		t.Fatalf("Latest = %d, %v", seq, err)
	}
	infos, err := s.List()
	if err != nil || len(infos) != 4 || infos[0].Seq != 0 || infos[3].Seq != 2000 {
		t.Fatalf("List = %+v, %v", infos, err)
	}
	if !strings.HasSuffix(infos[3].Path, "snapshot-00000000000000002000.snap") {
		t.Fatalf("file name %s", infos[3].Path)
	}
	if o, ok := s.OldestSeq(); !ok || o != 0 {
		t.Fatalf("OldestSeq = %d %v", o, ok)
	}
	// Replacing a snapshot at the same seq.
	if err := s.Write(300, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Load(300); err != nil || string(d) != "new" {
		t.Fatalf("Load(300) = %q %v", d, err)
	}
	if _, err := s.Load(301); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load(missing) = %v", err)
	}
	if _, err := s.Prune(0); err == nil {
		t.Fatal("Prune(0) accepted")
	}
	oldest, err := s.Prune(2)
	if err != nil || oldest != 300 {
		t.Fatalf("Prune(2) = %d, %v", oldest, err)
	}
	if o, ok := s.OldestSeq(); !ok || o != 300 {
		t.Fatalf("OldestSeq after prune = %d %v", o, ok)
	}
	infos, _ = s.List()
	if len(infos) != 2 || infos[0].Seq != 300 || infos[1].Seq != 2000 {
		t.Fatalf("after Prune(2): %+v", infos)
	}
}

func TestSnapshotStoreSkipsDamaged(t *testing.T) {
	dir := t.TempDir()
	s, logs := snapTestOpen(t, dir)
	for _, seq := range []uint64{10, 20, 30, 40, 50} {
		if err := s.Write(seq, snapTestData(seq)); err != nil {
			t.Fatal(err)
		}
	}
	damage := map[uint64]func([]byte) []byte{
		50: func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, // data byte
		40: func(b []byte) []byte { return b[:len(b)-7] },        // truncated
		30: func(b []byte) []byte { b[14] ^= 0x10; return b },    // header seq
		20: func(b []byte) []byte { return []byte("UBSCSNAP") },  // too short
		10: func(b []byte) []byte { b[0] = 'X'; return b },       // magic
	}
	for _, seq := range []uint64{50, 40, 30, 20, 10} {
		p := s.path(seq)
		b, _ := os.ReadFile(p)
		os.WriteFile(p, damage[seq](b), 0o640)
		if _, err := s.Load(seq); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Load(%d) of damaged = %v", seq, err)
		}
		got, data, err := s.Latest()
		if seq == 10 {
			if !errors.Is(err, ErrNoSnapshot) {
				t.Fatalf("all damaged: Latest = %d %v", got, err)
			}
			break
		}
		if err != nil || got != seq-10 || !bytes.Equal(data, snapTestData(seq-10)) {
			t.Fatalf("newest %d damaged: Latest = %d, %v", seq, got, err)
		}
	}
	if !strings.Contains(logs.String(), "damaged snapshot") {
		t.Fatalf("damage not logged: %s", logs.String())
	}
	// A snapshot file renamed to another seq is rejected too.
	s.Write(60, snapTestData(60))
	os.Rename(s.path(60), s.path(70))
	if got, _, err := s.Latest(); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("renamed snapshot accepted: %d %v", got, err)
	}
}

func TestSnapshotStorePruneDropsDamaged(t *testing.T) {
	dir := t.TempDir()
	s, _ := snapTestOpen(t, dir)
	for seq := uint64(1); seq <= 6; seq++ {
		s.Write(seq*100, snapTestData(seq))
	}
	os.WriteFile(s.path(600), []byte("garbage"), 0o640) // newest damaged
	oldest, err := s.Prune(2)
	if err != nil || oldest != 400 {
		t.Fatalf("Prune(2) = %d, %v", oldest, err)
	}
	infos, _ := s.List()
	if len(infos) != 2 || infos[0].Seq != 400 || infos[1].Seq != 500 {
		t.Fatalf("kept %+v", infos)
	}
}

func TestSnapshotStoreTempFiles(t *testing.T) {
	dir := t.TempDir()
	s, _ := snapTestOpen(t, dir)
	s.Write(5, snapTestData(5))
	// A crash mid-write leaves a temp file (possibly complete and valid).
	tmp := filepath.Join(dir, "snapshot-12345.tmp")
	b, _ := os.ReadFile(s.path(5))
	os.WriteFile(tmp, b, 0o640)
	os.WriteFile(filepath.Join(dir, "unrelated.txt"), []byte("x"), 0o640)
	if infos, _ := s.List(); len(infos) != 1 {
		t.Fatalf("temp file listed: %+v", infos)
	}
	if seq, _, err := s.Latest(); err != nil || seq != 5 {
		t.Fatalf("Latest = %d %v", seq, err)
	}
	s2, _ := snapTestOpen(t, dir)
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("temp file not removed at open")
	}
	if seq, _, err := s2.Latest(); err != nil || seq != 5 {
		t.Fatalf("Latest after reopen = %d %v", seq, err)
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".tmp") {
			t.Fatalf("Write left a temp file: %s", de.Name())
		}
	}
}

// TestPruneKeepingPin: besides the newest keep snapshots, PruneKeeping keeps
// the newest one at or below the pin (a downstream consumer restarts there).
func TestPruneKeepingPin(t *testing.T) {
	s, _ := snapTestOpen(t, t.TempDir())
	for _, seq := range []uint64{10, 20, 30, 40, 50} {
		if err := s.Write(seq, []byte{byte(seq)}); err != nil {
			t.Fatal(err)
		}
	}
	oldest, pinned, err := s.PruneKeeping(2, 35)
	if err != nil {
		t.Fatal(err)
	}
	if pinned != 30 {
		t.Fatalf("pinned %d, want 30", pinned)
	}
	var got []uint64
	infos, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		got = append(got, in.Seq)
	}
	if oldest != 30 || len(got) != 3 || got[0] != 30 || got[1] != 40 || got[2] != 50 {
		t.Fatalf("kept %v (oldest %d), want [30 40 50] (oldest 30)", got, oldest)
	}
	if _, pinned, err := s.PruneKeeping(2, 5); err != nil || pinned != 0 {
		t.Fatalf("a pin below every snapshot: pinned %d, %v", pinned, err)
	}
	if _, _, err := s.PruneKeeping(2, 0); err != nil {
		t.Fatal(err)
	}
	if infos, _ := s.List(); len(infos) != 2 {
		t.Fatalf("without a pin %d snapshots kept, want 2", len(infos))
	}
}

// TestSnapshotStoreWriteInChunks: a snapshot of several writeBack chunks
// (and a part of one) reads back whole, and a replaced one too.
func TestSnapshotStoreWriteInChunks(t *testing.T) {
	s, _ := snapTestOpen(t, filepath.Join(t.TempDir(), "snaps"))
	for _, size := range []int{3*writeBackChunk + 4097, writeBackChunk, 1} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + size)
		}
		if err := s.Write(42, data); err != nil {
			t.Fatal(err)
		}
		got, err := s.Load(42)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: read back %d bytes, equal %v, %v", size, len(got), bytes.Equal(got, data), err)
		}
	}
}
