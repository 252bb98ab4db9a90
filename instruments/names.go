package instruments

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ubscore/ubscore/gateway"
)

// namesFileName is the data dir's record of the instruments in effect
// (gateway.Names: asset and market names and scales by id, a subset of the
// --config format). The WAL holds ids only; tools that read a data dir on
// their own (cmd/replay state) take the names from here. Rewritten at
// every start.
const namesFileName = "instruments.json"

// WriteNames replaces <dataDir>/instruments.json with reg's instruments
// (a synced temp file renamed into place).
func WriteNames(dataDir string, reg *gateway.Registry) error {
	b, err := json.MarshalIndent(reg.Names(), "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dataDir, namesFileName+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(append(b, '\n'))
	serr := tmp.Sync()
	if err := tmp.Close(); werr != nil || serr != nil || err != nil {
		return fmt.Errorf("write %s: %v %v %v", namesFileName, werr, serr, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dataDir, namesFileName)); err != nil {
		return err
	}
	if d, err := os.Open(dataDir); err == nil { // the rename itself durable
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
