package bench

import (
	"testing"
	"time"
)

// TestStateRetentionFlat (test-long; skipped with -short): spec 003
// transfers through the pipeline with a short retention — what the core
// retains and its snapshots stay flat while the transfers made grow
// fourfold (the full 20M run is `bench state`).
func TestStateRetentionFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("a large run: make test-long")
	}
	pts, err := RunState(StateConfig{Dir: t.TempDir(), Transfers: 800_000, Users: 2_000, Retention: 50 * time.Microsecond,
		Every: 200_000, Snapshot: 100_000, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 4 {
		t.Fatalf("%d points", len(pts))
	}
	first, last := pts[0], pts[len(pts)-1]
	for _, p := range pts {
		t.Log(p)
	}
	if last.Made < 3*first.Made || last.Retained > first.Retained*6/5 || last.Retained > int(last.Made)/4 {
		t.Fatalf("retained %d -> %d while made %d -> %d: not flat", first.Retained, last.Retained, first.Made, last.Made)
	}
	if r := float64(last.SnapBytes) / float64(first.SnapBytes); last.Snapshots < 4 || r > 1.2 || r < 0.8 {
		t.Fatalf("snapshot %d -> %d bytes (%d written): not flat", first.SnapBytes, last.SnapBytes, last.Snapshots)
	}
}
