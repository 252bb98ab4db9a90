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
	path := filepath.Join(dataDir, walIDFileName)
	if b, err := os.ReadFile(path); err == nil {
		id := strings.TrimSpace(string(b))
		if len(id) != 32 {
			return "", fmt.Errorf("%s: want 32 hex characters, found %q", path, id)
		}
		return id, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
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
