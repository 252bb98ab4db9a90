package bench

import (
	"testing"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/instruments"
)

// TestRestartInstruments: the --config file bench restart gives the
// exchange parses and describes the markets RunRestart builds (else the
// exchange refuses to start on the data dir: instruments.Check).
func TestRestartInstruments(t *testing.T) {
	cfg, err := instruments.Parse(restartInstruments(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Assets) != 2 || cfg.Assets[0].ID != 1 || cfg.Assets[0].Scale != 2 || cfg.Assets[1].ID != 2 || cfg.Assets[1].Scale != 0 {
		t.Fatalf("assets %+v", cfg.Assets)
	}
	want := core.MarketCfg{Base: 2, Quote: 1, Tick: 1, Lot: 1, MinQty: 1, MaxQty: 1_000_000, MakerFee: 1_000, TakerFee: 2_000}
	if len(cfg.Markets) != 100 {
		t.Fatalf("%d markets", len(cfg.Markets))
	}
	for i, m := range cfg.Markets {
		if m.ID != core.MarketID(i+1) || m.Cfg != want {
			t.Fatalf("market %d: id %d %+v, want %+v", i, m.ID, m.Cfg, want)
		}
	}
}
