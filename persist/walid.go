package persist

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ubscore/ubscore/journal"
)

// walIDFileName names the data dir's identity: 16 random bytes, hex, made
// on the first start and never changed. The Postgres read model records it
// (core_checkpoint.wal_id), so a sink never writes one WAL's history into a
// database another WAL's sink filled.
const walIDFileName = "wal.id"

// LoadOrCreateWALID returns <dataDir>/wal.id, creating it (journal.CreateOnce) if
// it does not exist.
func LoadOrCreateWALID(dataDir string) (string, error) {
	if id, err := readWALID(dataDir); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return id, err
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return "", err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	if _, err := journal.CreateOnce(dataDir, walIDFileName, hex.EncodeToString(raw[:])+"\n"); err != nil {
		return "", err
	}
	return LoadOrCreateWALID(dataDir) // ours, or the one a concurrent process linked first
}

// ErrOtherVenue: a data dir already belongs to another venue than the one
// whose identity it is asked to adopt.
var ErrOtherVenue = errors.New("persist: the data dir belongs to another venue")

// VenueIdentity is the WAL id of a node of a replicated venue (docs/design.md, "Replication"):
// every node of one venue shares it, so the sink of whichever node is the
// primary continues the same read model, exactly once by seq. It returns
// the data dir's id if it has one; else a new one for a node starting as
// the primary, "" for a standby (which adopts the log's). adopt makes the
// data dir take a venue's id (the first epoch marker a node reads), and
// refuses (ErrOtherVenue) a data dir that already has another one.
func VenueIdentity(dataDir string, primary bool) (venue string, adopt func(id string) error, err error) {
	adopt = func(id string) error {
		if len(id) != 32 {
			return fmt.Errorf("persist: venue id %q: want 32 hex characters", id)
		}
		have, err := readWALID(dataDir)
		if err == nil && have != id {
			return fmt.Errorf("%w: %s holds %s, the log is venue %s", ErrOtherVenue, walIDFileName, have, id)
		}
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.MkdirAll(dataDir, 0o750); err != nil {
			return err
		}
		if _, err := journal.CreateOnce(dataDir, walIDFileName, id+"\n"); err != nil {
			return err
		}
		if have, err := readWALID(dataDir); err != nil || have != id { // a concurrent writer linked another first
			return fmt.Errorf("%w: %s holds %s, the log is venue %s", ErrOtherVenue, walIDFileName, have, id)
		}
		return nil
	}
	venue, err = readWALID(dataDir)
	switch {
	case err == nil:
		return venue, adopt, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", nil, err
	case primary:
		venue, err = LoadOrCreateWALID(dataDir)
		return venue, adopt, err
	}
	return "", adopt, nil
}

// readWALID reads <dataDir>/wal.id (fs.ErrNotExist if there is none).
func readWALID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, walIDFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if len(id) != 32 {
		return "", fmt.Errorf("%s: want 32 hex characters, found %q", path, id)
	}
	return id, nil
}
