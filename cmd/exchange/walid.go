package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// walIDFileName names the data dir's identity: 16 random bytes, hex, made
// on the first start and never changed. The Postgres read model records it
// (core_checkpoint.wal_id), so a sink never writes one WAL's history into a
// database another WAL's sink filled.
const walIDFileName = "wal.id"

// loadOrCreateWALID returns <dataDir>/wal.id, creating it atomically and
// exclusively (temp file linked into place, then a directory fsync) if it
// does not exist.
func loadOrCreateWALID(dataDir string) (string, error) {
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
	tmp, err := os.CreateTemp(dataDir, walIDFileName+".tmp*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(raw[:]) + "\n")
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("create %s: %w", path, err)
	} else if err == nil {
		syncDir(dataDir)
	}
	return loadOrCreateWALID(dataDir) // ours, or the one a concurrent process linked first
}
