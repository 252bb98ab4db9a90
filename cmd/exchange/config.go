package main

import "github.com/ubscore/ubscore/core"

// defaultAssets and defaultMarkets are the built-in config, so the server
// starts with no files. Ids are stable: they are baked into the WAL.
var defaultAssets = []struct {
	ID    core.AssetID
	Name  string
	Scale uint8
}{
	{1, "USDT", 6},
	{2, "BTC", 8},
	{3, "ETH", 8},
}

var defaultMarkets = []struct {
	ID   core.MarketID
	Name string
	Cfg  core.MarketCfg
}{
	// tick 0.01 USDT x lot 0.0001 BTC = 10^4 x 10^4 = 10^8 = 10^BaseScale: notionals are exact.
	{1, "BTC-USDT", core.MarketCfg{Base: 2, Quote: 1, BaseScale: 8, Tick: 10_000, Lot: 10_000,
		MinQty: 10_000, MaxQty: 1_000 * 100_000_000, MakerFee: 1_000, TakerFee: 2_000}},
	{2, "ETH-USDT", core.MarketCfg{Base: 3, Quote: 1, BaseScale: 8, Tick: 10_000, Lot: 10_000,
		MinQty: 10_000, MaxQty: 10_000 * 100_000_000, MakerFee: 1_000, TakerFee: 2_000}},
}

// configCommands returns the commands that install the default config on a
// fresh core (they are idempotent, so re-applying them is harmless).
func configCommands() []core.Command {
	var out []core.Command
	for _, a := range defaultAssets {
		out = append(out, core.Command{Kind: core.KindConfigAsset, Asset: a.ID, BaseScale: a.Scale})
	}
	for _, m := range defaultMarkets {
		out = append(out, core.Command{Kind: core.KindConfigMarket, Market: m.ID, Cfg: m.Cfg})
	}
	return out
}
