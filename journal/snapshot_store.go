package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Snapshot file layout (little-endian), see the package doc:
//
//	[0:8]   magic "UBSCSNAP"
//	[8:12]  version (1)
//	[12:20] seq
//	[20:28] data length
//	[28:32] CRC-32C of data
//	[32:36] CRC-32C of bytes [0:32]
//	[36:]   data
const (
	snapMagic      = "UBSCSNAP"
	snapVersion    = 1
	snapHeaderSize = 36
	snapPrefix     = "snapshot-"
	snapSuffix     = ".snap"
	snapTempSuffix = ".tmp"
)

// SnapshotInfo names one snapshot file.
type SnapshotInfo struct {
	Seq  uint64 // the seq of the last command the snapshot includes
	Path string
	Size int64 // file size, header included
}

// SnapshotStore keeps state snapshots in a directory, one file per seq
// (snapshot-<20-digit seq>.snap), each written atomically (temp file,
// fsync, rename, directory fsync) and checksummed.
type SnapshotStore struct {
	dir string
	log *slog.Logger
	mu  sync.Mutex // serialises Write, Prune and OldestSeq

	// The oldest snapshot kept by the last successful Prune.
	oldest      uint64
	oldestValid bool
	oldestKnown bool
}

// OpenSnapshotStore opens (creating if needed) the snapshot directory and
// removes temp files left by interrupted writes. logger may be nil
// (slog.Default()).
func OpenSnapshotStore(dir string, logger *slog.Logger) (*SnapshotStore, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("journal: snapshot dir: %w", err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("journal: snapshot dir: %w", err)
	}
	for _, de := range des {
		if n := de.Name(); strings.HasPrefix(n, snapPrefix) && strings.HasSuffix(n, snapTempSuffix) {
			if err := os.Remove(filepath.Join(dir, n)); err == nil {
				logger.Info("journal: removed leftover snapshot temp file", "file", n)
			}
		}
	}
	return &SnapshotStore{dir: dir, log: logger}, nil
}

// Dir returns the snapshot directory.
func (s *SnapshotStore) Dir() string { return s.dir }

func (s *SnapshotStore) path(seq uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s%020d%s", snapPrefix, seq, snapSuffix))
}

// Write stores data as the snapshot at seq, atomically and durably: when it
// returns nil the snapshot survives a crash; if it fails or the process
// dies midway, no partial snapshot is ever visible under the final name.
// A snapshot already stored at seq is replaced.
func (s *SnapshotStore) Write(seq uint64, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.CreateTemp(s.dir, snapPrefix+"*"+snapTempSuffix)
	if err != nil {
		return fmt.Errorf("journal: snapshot %d: %w", seq, err)
	}
	tmp := f.Name()
	err = func() error {
		var hdr [snapHeaderSize]byte
		copy(hdr[0:8], snapMagic)
		binary.LittleEndian.PutUint32(hdr[8:12], snapVersion)
		binary.LittleEndian.PutUint64(hdr[12:20], seq)
		binary.LittleEndian.PutUint64(hdr[20:28], uint64(len(data)))
		binary.LittleEndian.PutUint32(hdr[28:32], crc32.Checksum(data, castagnoli))
		binary.LittleEndian.PutUint32(hdr[32:36], crc32.Checksum(hdr[:32], castagnoli))
		if _, err := f.Write(hdr[:]); err != nil {
			return err
		}
		if err := writeBack(f, int64(len(hdr)), data); err != nil {
			return err
		}
		return f.Sync()
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path(seq))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("journal: snapshot %d: %w", seq, err)
	}
	if s.oldestKnown && seq <= s.oldest {
		s.oldestKnown = false // a new oldest, or a replaced one
	}
	return walFsyncDir(s.dir)
}

// List returns every snapshot file (verified or not), oldest first.
func (s *SnapshotStore) List() ([]SnapshotInfo, error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("journal: list snapshots: %w", err)
	}
	var out []SnapshotInfo
	for _, de := range des {
		n := de.Name()
		if de.IsDir() || len(n) != len(snapPrefix)+20+len(snapSuffix) ||
			!strings.HasPrefix(n, snapPrefix) || !strings.HasSuffix(n, snapSuffix) {
			continue
		}
		seq, err := strconv.ParseUint(n[len(snapPrefix):len(snapPrefix)+20], 10, 64)
		if err != nil {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, SnapshotInfo{Seq: seq, Path: filepath.Join(s.dir, n), Size: info.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// Load reads and verifies the snapshot at seq. Damage is reported as an
// error matching ErrCorrupt; a missing file matches os.ErrNotExist.
func (s *SnapshotStore) Load(seq uint64) ([]byte, error) {
	return loadSnapshot(s.path(seq), seq)
}

func loadSnapshot(path string, seq uint64) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("journal: read snapshot: %w", err)
	}
	bad := func(reason string) ([]byte, error) {
		return nil, fmt.Errorf("%w: snapshot %s (seq %d): %s", ErrCorrupt, path, seq, reason)
	}
	if len(b) < snapHeaderSize {
		return bad(fmt.Sprintf("file too short (%d bytes)", len(b)))
	}
	if string(b[0:8]) != snapMagic {
		return bad("bad magic")
	}
	if crc32.Checksum(b[:32], castagnoli) != binary.LittleEndian.Uint32(b[32:36]) {
		return bad("header checksum mismatch")
	}
	if v := binary.LittleEndian.Uint32(b[8:12]); v != snapVersion {
		return bad(fmt.Sprintf("unsupported version %d", v))
	}
	if got := binary.LittleEndian.Uint64(b[12:20]); got != seq {
		return bad(fmt.Sprintf("header carries seq %d", got))
	}
	if n := binary.LittleEndian.Uint64(b[20:28]); n != uint64(len(b)-snapHeaderSize) {
		return bad(fmt.Sprintf("length %d, file holds %d data bytes", n, len(b)-snapHeaderSize))
	}
	data := b[snapHeaderSize:]
	if crc32.Checksum(data, castagnoli) != binary.LittleEndian.Uint32(b[28:32]) {
		return bad("data checksum mismatch")
	}
	return data, nil
}

// Latest returns the newest snapshot that verifies. Damaged snapshots are
// skipped with a warning; ErrNoSnapshot if none verifies. I/O errors other
// than damage are returned.
func (s *SnapshotStore) Latest() (seq uint64, data []byte, err error) {
	infos, err := s.List()
	if err != nil {
		return 0, nil, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		data, err := loadSnapshot(infos[i].Path, infos[i].Seq)
		if err == nil {
			return infos[i].Seq, data, nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return 0, nil, err
		}
		s.log.Warn("journal: skipping damaged snapshot", "seq", infos[i].Seq, "err", err)
	}
	return 0, nil, ErrNoSnapshot
}

// Prune deletes every snapshot except the newest keep (>= 1) that verify;
// damaged snapshots among the newer ones are deleted too. It returns the
// seq of the oldest snapshot kept (also reported later by OldestSeq): WAL
// entries up to it are no longer needed, WAL.TruncateFront(oldest+1) is
// safe. ErrNoSnapshot (and nothing deleted) if no snapshot verifies.
func (s *SnapshotStore) Prune(keep int) (oldest uint64, err error) {
	oldest, _, err = s.prune(keep, 0)
	return oldest, err
}

// PruneKeeping is Prune that also keeps the newest valid snapshot at or
// below pin (when pin > 0): a downstream consumer that has persisted up to
// pin re-derives its events from there after a restart. pinned is that
// snapshot's seq, 0 if there is none (the consumer then needs the WAL from
// its start).
func (s *SnapshotStore) PruneKeeping(keep int, pin uint64) (oldest, pinned uint64, err error) {
	return s.prune(keep, pin)
}

// OldestSeq returns the seq of the oldest valid snapshot (after Prune: the
// oldest one kept), false if there is none. WAL entries up to it are no
// longer needed for recovery: WAL.TruncateFront(seq+1) is safe. The answer
// is remembered from the last Prune; without one, snapshots are verified
// oldest first until one passes.
func (s *SnapshotStore) OldestSeq() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oldestKnown {
		return s.oldest, s.oldest != 0 || s.oldestValid
	}
	infos, err := s.List()
	if err != nil {
		return 0, false
	}
	for _, in := range infos {
		if _, err := loadSnapshot(in.Path, in.Seq); err == nil {
			return in.Seq, true
		}
	}
	return 0, false
}

func (s *SnapshotStore) prune(keep int, pin uint64) (oldest, pinned uint64, err error) {
	if keep < 1 {
		return 0, 0, fmt.Errorf("journal: prune: keep must be >= 1, got %d", keep)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oldestKnown = false
	infos, err := s.List()
	if err != nil {
		return 0, 0, err
	}
	var drop []SnapshotInfo
	kept := 0
	havePin := pin == 0 // no pin, or the pinned snapshot is already kept
	for i := len(infos) - 1; i >= 0; i-- {
		if kept >= keep && (havePin || infos[i].Seq > pin) {
			drop = append(drop, infos[i])
			continue
		}
		if _, err := loadSnapshot(infos[i].Path, infos[i].Seq); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return 0, 0, err
			}
			s.log.Warn("journal: pruning damaged snapshot", "seq", infos[i].Seq, "err", err)
			drop = append(drop, infos[i])
			continue
		}
		kept++
		oldest = infos[i].Seq
		if !havePin && infos[i].Seq <= pin {
			havePin, pinned = true, infos[i].Seq
		}
	}
	if kept == 0 {
		return 0, 0, ErrNoSnapshot
	}
	for _, d := range drop {
		if err := os.Remove(d.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return oldest, pinned, fmt.Errorf("journal: prune snapshot %d: %w", d.Seq, err)
		}
	}
	if len(drop) > 0 {
		if err := walFsyncDir(s.dir); err != nil {
			return oldest, pinned, err
		}
	}
	s.oldest, s.oldestValid, s.oldestKnown = oldest, true, true
	return oldest, pinned, nil
}
