package journal

import (
	"log/slog"
	"math"
)

// LatestSnapshotIn returns the newest snapshot in the snapshot directory
// dir that verifies, only reading: unlike OpenSnapshotStore it removes no
// temp file, so it is safe beside a running pipeline that writes (and
// prunes) snapshots there. A snapshot removed between the listing and its
// read, or damaged, is passed over for the one before; ErrNoSnapshot if
// none is left.
func LatestSnapshotIn(dir string) (seq uint64, data []byte, err error) {
	return LatestSnapshotAtOrBelow(dir, math.MaxUint64)
}

// LatestSnapshotAtOrBelow is LatestSnapshotIn among the snapshots whose
// seq is at most max (those above it are not read); ErrNoSnapshot if none
// at or below max verifies.
func LatestSnapshotAtOrBelow(dir string, max uint64) (seq uint64, data []byte, err error) {
	return latestAtOrBelow(&SnapshotStore{dir: dir, log: slog.Default()}, max, slog.Default())
}
