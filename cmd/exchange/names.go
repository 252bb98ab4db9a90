package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// namesFileName is the data dir's record of the instruments in effect:
// asset and market names and scales by id, in a subset of the --config
// format. The WAL holds ids only; tools that read a data dir on their own
// (cmd/replay state) take the names from here. Rewritten at every start.
const namesFileName = "instruments.json"

type namesFile struct {
	Assets  []namesAsset  `json:"assets"`
	Markets []namesMarket `json:"markets"`
}

type namesAsset struct {
	Symbol string `json:"symbol"`
	ID     uint32 `json:"id"`
	Scale  uint8  `json:"scale"`
}

type namesMarket struct {
	Symbol string `json:"symbol"`
	ID     uint32 `json:"id"`
	Base   string `json:"base"`
	Quote  string `json:"quote"`
}

// writeNames replaces <dataDir>/instruments.json with cfg's instruments
// (a synced temp file renamed into place).
func writeNames(dataDir string, cfg Config) error {
	var f namesFile
	sym := map[uint32]string{}
	for _, a := range cfg.Assets {
		f.Assets = append(f.Assets, namesAsset{Symbol: a.Symbol, ID: uint32(a.ID), Scale: a.Scale})
		sym[uint32(a.ID)] = a.Symbol
	}
	for _, m := range cfg.Markets {
		f.Markets = append(f.Markets, namesMarket{Symbol: m.Symbol, ID: uint32(m.ID),
			Base: sym[uint32(m.Cfg.Base)], Quote: sym[uint32(m.Cfg.Quote)]})
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dataDir, namesFileName+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", namesFileName, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", namesFileName, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dataDir, namesFileName)); err != nil {
		return err
	}
	syncDir(dataDir)
	return nil
}
