package journal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// FaultsMarker names the data dir's record that fault injection was once
// allowed (core.Config.AllowFaults): from then on the WAL may hold
// journaled KindFault commands, and every replay of it — a later start
// with or without --enable-fault-injection, the replay tool — must apply
// them as the process that acknowledged them did. Without it a start
// without the flag replayed an acknowledged fault as UNKNOWN_COMMAND: the
// state silently differed from what clients were told and from Postgres,
// and its next snapshot made the difference permanent. The marker only
// makes replay faithful: whether new faults may be injected stays the
// gateway's flag (its endpoint is off without it).
const FaultsMarker = "faults.allowed"

// markFaults records FaultsMarker in dir (durably: the file and its
// directory entry are synced before the first fault can be journaled).
func markFaults(dir string) error {
	if faultsMarked(dir) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, FaultsMarker), os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	_, err = f.WriteString("fault injection was allowed on this data dir: its WAL may hold faults, every replay applies them\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return walFsyncDir(dir)
}

// faultsMarked reports whether dir holds FaultsMarker.
func faultsMarked(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, FaultsMarker))
	return err == nil || !errors.Is(err, fs.ErrNotExist) // unreadable: assume marked (replaying faults is the safe side)
}
