package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
)

// TestCheckInstrumentsBinary (issue 40): a binary market in the data dir is
// not in --config and does not stop the start, in DRAFT or ACTIVE; a
// configured spot market under a binary market's id refuses the start with
// errBinaryCollision, naming both, and still lists any other difference.
func TestCheckInstrumentsBinary(t *testing.T) {
	pl, _ := startSpot(t, core.Config{})
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
	var cfg Config
	cfg.Assets, cfg.Markets = defaultInstruments()
	if err := checkInstruments(pl, cfg); err != nil {
		t.Fatalf("binary markets in the data dir: %v", err)
	}

	spot := func(id core.MarketID, symbol string) gateway.MarketSpec {
		return gateway.MarketSpec{ID: id, Symbol: symbol, Cfg: core.MarketCfg{Base: 3, Quote: 2, BaseScale: 8, Tick: 1,
			Lot: 100_000_000, MinQty: 100_000_000, MaxQty: 1e10}}
	}
	clash := cfg
	clash.Markets = append(append([]gateway.MarketSpec(nil), cfg.Markets...), spot(8, "ETH-BTC"))
	err := checkInstruments(pl, clash)
	if !errors.Is(err, errBinaryCollision) || !strings.Contains(err.Error(), `spot market "ETH-BTC" has id 8, binary market 8 (ACTIVE)`) {
		t.Fatalf("a spot market on a binary market's id: %v", err)
	}
	if strings.Contains(err.Error(), "instruments differ") {
		t.Fatalf("the collision alone reported as a difference: %v", err)
	}
	// A spot market the config adds on a free id still starts.
	added := cfg
	added.Markets = append(append([]gateway.MarketSpec(nil), cfg.Markets...), spot(9, "ETH-BTC"))
	if err := checkInstruments(pl, added); err != nil {
		t.Fatalf("a spot market on a free id: %v", err)
	}
	// Both kinds of problem at once: both named.
	both := clash
	both.Markets = append([]gateway.MarketSpec(nil), clash.Markets[1:]...) // BTC-USDT (id 1) removed
	err = checkInstruments(pl, both)
	if !errors.Is(err, errBinaryCollision) || !strings.Contains(err.Error(), "market id 1 is in the data dir") {
		t.Fatalf("a collision and a removed market: %v", err)
	}
}
