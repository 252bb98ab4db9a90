package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
)

// names resolves the ids of the WAL to the instruments' names and scales:
// from the data dir's instruments.json (the exchange writes it at every
// start) or a --config file of the exchange (the same format, more fields).
// Without either, names are "#id" and amounts stay in raw units.
type names struct {
	assets  map[core.AssetID]gateway.NamedAsset
	markets map[core.MarketID]gateway.NamedMarket
	source  string // the file read, "" if none
}

// loadNames reads file, or <data>/instruments.json when file is "" (its
// absence is not an error then: the names are ids).
func loadNames(data, file string) (*names, error) {
	n := &names{assets: map[core.AssetID]gateway.NamedAsset{}, markets: map[core.MarketID]gateway.NamedMarket{}}
	path := file
	if path == "" {
		path = filepath.Join(data, "instruments.json")
	}
	b, err := os.ReadFile(path)
	if file == "" && errors.Is(err, fs.ErrNotExist) {
		return n, nil
	}
	if err != nil {
		return nil, err
	}
	var f gateway.Names // the --config format has these fields too (and more)
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, a := range f.Assets {
		n.assets[a.ID] = a
	}
	for _, m := range f.Markets {
		n.markets[m.ID] = m
	}
	n.source = path
	return n, nil
}

// asset is the name of id ("#id" if unknown).
func (n *names) asset(id core.AssetID) string {
	if a, ok := n.assets[id]; ok {
		return a.Symbol
	}
	return "#" + strconv.FormatUint(uint64(id), 10)
}

// market is the name of id ("#id" if unknown).
func (n *names) market(id core.MarketID) string {
	if m, ok := n.markets[id]; ok {
		return m.Symbol
	}
	return "#" + strconv.FormatUint(uint64(id), 10)
}

// findAsset resolves a --asset value: a symbol or an id.
func (n *names) findAsset(s string) (core.AssetID, bool) {
	for id, a := range n.assets {
		if a.Symbol == s {
			return id, true
		}
	}
	v, err := strconv.ParseUint(s, 10, 32)
	return core.AssetID(v), err == nil && v > 0 && v <= core.MaxAssets
}

// findMarket resolves a --market value: a symbol or an id.
func (n *names) findMarket(s string) (core.MarketID, bool) {
	for id, m := range n.markets {
		if m.Symbol == s {
			return id, true
		}
	}
	v, err := strconv.ParseUint(s, 10, 32)
	return core.MarketID(v), err == nil && v > 0 && v <= core.MaxMarkets
}

// units formats v of asset id at its scale, or raw (also when the scale is
// unknown).
func (n *names) units(v core.Units, id core.AssetID, raw bool) string {
	a, ok := n.assets[id]
	if raw || !ok {
		return strconv.FormatInt(int64(v), 10)
	}
	return gateway.FormatUnits(int64(v), a.Scale)
}
