package instruments

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
)

// startDefault starts a pipeline with the built-in instruments installed
// (closed when the test ends).
func startDefault(t *testing.T) *journal.Pipeline {
	t.Helper()
	pl, err := journal.Start(journal.Config{Dir: t.TempDir(), ReadView: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Close() })
	if n, err := Install(pl, Default()); err != nil || n != len(defaultMarkets) {
		t.Fatalf("install: %d %v", n, err)
	}
	if n, err := Install(pl, Default()); err != nil || n != 0 {
		t.Fatalf("install again: %d markets, %v (want none)", n, err)
	}
	return pl
}

// TestCheckInstrumentsBinary (issue 40): a binary market in the data dir is
// not in --config and does not stop the start, in DRAFT or ACTIVE; a
// configured spot market under a binary market's id refuses the start with
// ErrBinaryCollision, naming both, and still lists any other difference.
func TestCheckInstrumentsBinary(t *testing.T) {
	pl := startDefault(t)
	r := journal.NewReply()
	apply := func(c core.Command) {
		t.Helper()
		if _, err := pl.Submit(&c, r); err != nil || pl.Wait(r) != nil || r.Result().Code != core.OK {
			t.Fatalf("%v: %v %v", c.Kind, err, r.Result().Code)
		}
	}
	// Two binary markets over USDT: 7 stays in DRAFT, 8 is activated.
	for _, id := range []core.MarketID{7, 8} {
		apply(core.Command{Kind: core.KindConfigBinary, Market: id, Cfg: core.MarketCfg{Quote: 1, Lot: 1, MinQty: 1,
			MaxQty: 1_000}, Text: "Will it rain?"})
	}
	apply(core.Command{Kind: core.KindActivate, Market: 8, User: 1000})
	cfg := Default()
	if err := Check(pl, cfg); err != nil {
		t.Fatalf("binary markets in the data dir: %v", err)
	}

	spot := func(id core.MarketID, symbol string) gateway.MarketSpec {
		return gateway.MarketSpec{ID: id, Symbol: symbol, Cfg: core.MarketCfg{Base: 3, Quote: 2, BaseScale: 8, Tick: 1,
			Lot: 100_000_000, MinQty: 100_000_000, MaxQty: 1e10}}
	}
	clash := cfg
	clash.Markets = append(append([]gateway.MarketSpec(nil), cfg.Markets...), spot(8, "ETH-BTC"))
	err := Check(pl, clash)
	if !errors.Is(err, ErrBinaryCollision) || !strings.Contains(err.Error(), `spot market "ETH-BTC" has id 8, binary market 8 (ACTIVE)`) {
		t.Fatalf("a spot market on a binary market's id: %v", err)
	}
	if strings.Contains(err.Error(), "instruments differ") {
		t.Fatalf("the collision alone reported as a difference: %v", err)
	}
	// A spot market the config adds on a free id still starts.
	added := cfg
	added.Markets = append(append([]gateway.MarketSpec(nil), cfg.Markets...), spot(9, "ETH-BTC"))
	if err := Check(pl, added); err != nil {
		t.Fatalf("a spot market on a free id: %v", err)
	}
	// Both kinds of problem at once: both named.
	both := clash
	both.Markets = append([]gateway.MarketSpec(nil), clash.Markets[1:]...) // BTC-USDT (id 1) removed
	err = Check(pl, both)
	if !errors.Is(err, ErrBinaryCollision) || !strings.Contains(err.Error(), "market id 1 is in the data dir") {
		t.Fatalf("a collision and a removed market: %v", err)
	}
}

// TestCheckInstruments: the data dir's instruments against --config: the
// same config and a config that only adds a market start; a changed asset
// scale, a changed market config, a removed market or asset refuse, naming
// the difference.
func TestCheckInstruments(t *testing.T) {
	pl := startDefault(t)
	cfg := Default()
	if err := Check(pl, cfg); err != nil {
		t.Fatal(err)
	}
	added := cfg
	added.Markets = append(append([]gateway.MarketSpec(nil), cfg.Markets...), gateway.MarketSpec{ID: 3, Symbol: "ETH-BTC",
		Cfg: core.MarketCfg{Base: 3, Quote: 2, BaseScale: 8, Tick: 1, Lot: 100_000_000, MinQty: 100_000_000, MaxQty: 1e10}})
	if err := Check(pl, added); err != nil {
		t.Fatalf("an added market: %v", err)
	}
	for name, mod := range map[string]func(c *Config){
		"asset id 2 has scale 8 in the data dir, the config says 6": func(c *Config) { c.Assets[1].Scale = 6 },
		"market id 1 is":                          func(c *Config) { c.Markets[0].Cfg.TakerFee = 3_000 },
		"market id 2 is in the data dir":          func(c *Config) { c.Markets = c.Markets[:1] },
		"asset id 3 (scale 8) is in the data dir": func(c *Config) { c.Assets = c.Assets[:2]; c.Markets = c.Markets[:1] },
	} {
		c := cfg
		c = Default()
		mod(&c)
		if err := Check(pl, c); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
