package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CreateOnce writes content to dir/name atomically and exclusively: a synced
// temp file (mode 0600) linked into place, then the directory synced. It
// reports false, and changes nothing, when the file already exists (for
// example because a concurrent process linked first). The data dir's
// write-once files (wal.id, jwt.secret) are made with it.
func CreateOnce(dir, name, content string) (bool, error) {
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(content)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("create %s: %w", path, err)
	}
	syncDirBestEffort(dir)
	return true, nil
}

func syncDirBestEffort(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}
