package gateway

import "github.com/ubscore/ubscore/core"

// Names is the registry's instruments as names and scales by id, in a
// subset of cmd/exchange's --config format: what the exchange records in
// its data dir (instruments.json) for tools that read the WAL, which holds
// ids only (cmd/replay state).
type Names struct {
	Assets  []NamedAsset  `json:"assets"`
	Markets []NamedMarket `json:"markets"`
}

// NamedAsset is an asset's symbol and scale.
type NamedAsset struct {
	Symbol string       `json:"symbol"`
	ID     core.AssetID `json:"id"`
	Scale  uint8        `json:"scale"`
}

// NamedMarket is a market's symbol and its assets' symbols.
type NamedMarket struct {
	Symbol string        `json:"symbol"`
	ID     core.MarketID `json:"id"`
	Base   string        `json:"base"`
	Quote  string        `json:"quote"`
}

// Names returns r's instruments as Names, in id order.
func (r *Registry) Names() Names {
	n := Names{Assets: []NamedAsset{}, Markets: []NamedMarket{}}
	for _, a := range r.assets {
		n.Assets = append(n.Assets, NamedAsset{Symbol: a.Symbol, ID: a.ID, Scale: a.Scale})
	}
	for i := range r.markets {
		m := &r.markets[i]
		n.Markets = append(n.Markets, NamedMarket{Symbol: m.Symbol, ID: m.ID, Base: m.Base.Symbol, Quote: m.Quote.Symbol})
	}
	return n
}
