package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
	transferservice "github.com/ubscore/ubscore/persist/transfer/service"
)

// startSpot starts a pipeline with the built-in instruments (closed when
// the test ends) and a SPOT adapter over it (its own tests are in
// persist/transfer/service).
func startSpot(t *testing.T, cc core.Config) (*journal.Pipeline, *transferservice.SpotAdapter) {
	t.Helper()
	pl, err := journal.Start(journal.Config{Dir: t.TempDir(), ReadView: true, Logger: quietLogger(), Core: cc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Close() })
	var cfg Config
	cfg.Assets, cfg.Markets = defaultInstruments()
	if _, err := installConfig(pl, cfg); err != nil {
		t.Fatal(err)
	}
	return pl, transferservice.NewSpotAdapter(pl, 5*time.Second)
}

// TestCheckInstruments: the data dir's instruments against --config: the
// same config and a config that only adds a market start; a changed asset
// scale, a changed market config, a removed market or asset refuse, naming
// the difference.
func TestCheckInstruments(t *testing.T) {
	pl, _ := startSpot(t, core.Config{})
	var cfg Config
	cfg.Assets, cfg.Markets = defaultInstruments()
	if err := checkInstruments(pl, cfg); err != nil {
		t.Fatal(err)
	}
	added := cfg
	added.Markets = append(append([]gateway.MarketSpec(nil), cfg.Markets...), gateway.MarketSpec{ID: 3, Symbol: "ETH-BTC",
		Cfg: core.MarketCfg{Base: 3, Quote: 2, BaseScale: 8, Tick: 1, Lot: 100_000_000, MinQty: 100_000_000, MaxQty: 1e10}})
	if err := checkInstruments(pl, added); err != nil {
		t.Fatalf("an added market: %v", err)
	}
	for name, mod := range map[string]func(c *Config){
		"asset id 2 has scale 8 in the data dir, the config says 6": func(c *Config) { c.Assets[1].Scale = 6 },
		"market id 1 is":                          func(c *Config) { c.Markets[0].Cfg.TakerFee = 3_000 },
		"market id 2 is in the data dir":          func(c *Config) { c.Markets = c.Markets[:1] },
		"asset id 3 (scale 8) is in the data dir": func(c *Config) { c.Assets = c.Assets[:2]; c.Markets = c.Markets[:1] },
	} {
		c := cfg
		c.Assets, c.Markets = defaultInstruments()
		mod(&c)
		if err := checkInstruments(pl, c); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
