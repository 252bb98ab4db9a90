package journal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// LatestSnapshotIn reads the newest valid snapshot, passing over a damaged
// one, and leaves a writer's temp file alone (OpenSnapshotStore removes it).
func TestLatestSnapshotIn(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := LatestSnapshotIn(dir); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("empty dir: %v", err)
	}
	s, err := OpenSnapshotStore(dir, walQuietLogger())
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{10, 20, 30} {
		if err := s.Write(seq, []byte{byte(seq)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.path(30), []byte("damaged"), 0o640); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, snapPrefix+"123"+snapTempSuffix)
	if err := os.WriteFile(tmp, []byte("being written"), 0o640); err != nil {
		t.Fatal(err)
	}
	seq, data, err := LatestSnapshotIn(dir)
	if err != nil || seq != 20 || len(data) != 1 || data[0] != 20 {
		t.Fatalf("LatestSnapshotIn: %d %v %v", seq, data, err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("the temp file of a snapshot being written: %v", err)
	}
}

// LatestSnapshotAtOrBelow reads the newest valid snapshot at or below its
// bound: one above it is never chosen (nor read), a damaged one at or
// below it is passed over, and a bound below every snapshot finds none.
func TestLatestSnapshotAtOrBelow(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSnapshotStore(dir, walQuietLogger())
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{10, 20, 30, 40} {
		if err := s.Write(seq, []byte{byte(seq)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.path(20), []byte("damaged"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ max, want uint64 }{{100, 40}, {40, 40}, {39, 30}, {30, 30}, {29, 10}, {10, 10}} {
		seq, data, err := LatestSnapshotAtOrBelow(dir, c.max)
		if err != nil || seq != c.want || len(data) != 1 || data[0] != byte(c.want) {
			t.Fatalf("LatestSnapshotAtOrBelow(%d): %d %v %v, want %d", c.max, seq, data, err, c.want)
		}
	}
	if seq, _, err := LatestSnapshotAtOrBelow(dir, 9); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("LatestSnapshotAtOrBelow(9): %d, %v; want ErrNoSnapshot", seq, err)
	}
}
