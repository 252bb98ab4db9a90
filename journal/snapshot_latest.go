package journal

import (
	"errors"
	"log/slog"
	"math"
	"os"
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
	s := &SnapshotStore{dir: dir, log: slog.Default()}
	infos, err := s.List()
	if err != nil {
		return 0, nil, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		if infos[i].Seq > max {
			continue
		}
		data, err := loadSnapshot(infos[i].Path, infos[i].Seq)
		if err == nil {
			return infos[i].Seq, data, nil
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, os.ErrNotExist) {
			return 0, nil, err
		}
	}
	return 0, nil, ErrNoSnapshot
}
