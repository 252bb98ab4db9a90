package gateway

import (
	"errors"
	"strconv"

	"github.com/ubscore/ubscore/core"
)

// Asset names an asset of the core for the HTTP API.
type Asset struct {
	ID     core.AssetID // 1..core.MaxAssets, as configured in the core
	Symbol string       // e.g. "BTC": 1..MaxSymbolLen of A-Z, 0-9
	Scale  uint8        // decimals of the asset's Units (BTC: 8), <= MaxScale; equal to the core's
}

// MarketSpec is how a market is declared to NewRegistry.
type MarketSpec struct {
	ID     core.MarketID  // 1..core.MaxMarkets
	Symbol string         // e.g. "BTC-USDT": 1..MaxSymbolLen of A-Z, 0-9, '-', '_'
	Cfg    core.MarketCfg // the exact config installed in the core (KindConfigMarket)
}

// Market is a registered market with its assets resolved.
//
// Decimal strings of a market are read and written at its assets' scales:
// a quantity at Base.Scale (a core Units of the base asset), a price at
// Quote.Scale. core.Price is quote Units per 10^Cfg.BaseScale base Units and
// Cfg.BaseScale == Base.Scale, so "50000.25" USDT per BTC at quote scale 6 is
// Price 50_000_250_000 with no conversion: the price string and the Price
// share one scale.
type Market struct {
	ID     core.MarketID
	Symbol string
	Base   Asset
	Quote  Asset
	Cfg    core.MarketCfg
}

// MaxSymbolLen bounds asset and market symbols.
const MaxSymbolLen = 32

// Registry maps the API's names to the core's ids and scales. It is
// immutable after NewRegistry, so handlers read it without locks. It must
// mirror the config installed in the core; the core stays authoritative
// (an order the registry lets through is still checked there).
type Registry struct {
	assets   []Asset  // in id order
	markets  []Market // in id order
	assetIdx map[string]int
	mktIdx   map[string]int
	assetOf  [core.MaxAssets + 1]int16  // id -> index into assets, -1 if none
	marketOf [core.MaxMarkets + 1]int16 // id -> index into markets, -1 if none
}

// NewRegistry checks and indexes assets and markets: ids in range and
// unique, symbols unique and well-formed, each market's base and quote
// registered and distinct, Cfg.BaseScale equal to the base asset's scale.
func NewRegistry(assets []Asset, markets []MarketSpec) (*Registry, error) {
	r := &Registry{assetIdx: make(map[string]int), mktIdx: make(map[string]int)}
	for i := range r.assetOf {
		r.assetOf[i] = -1
	}
	for i := range r.marketOf {
		r.marketOf[i] = -1
	}
	for _, a := range sortedBy(assets, func(a Asset) uint64 { return uint64(a.ID) }) {
		if err := r.addAsset(a); err != nil {
			return nil, err
		}
	}
	for _, m := range sortedBy(markets, func(m MarketSpec) uint64 { return uint64(m.ID) }) {
		if err := r.addMarket(m); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Registry) addAsset(a Asset) error {
	name := "gateway: asset " + strconv.Quote(a.Symbol)
	switch {
	case a.ID == 0 || a.ID > core.MaxAssets:
		return errors.New(name + ": id out of range")
	case r.assetOf[a.ID] >= 0:
		return errors.New(name + ": duplicate id")
	case !validSymbol(a.Symbol, false):
		return errors.New(name + ": symbol must be 1-32 of A-Z, 0-9")
	case a.Scale > MaxScale:
		return errors.New(name + ": scale above MaxScale")
	}
	if _, dup := r.assetIdx[a.Symbol]; dup {
		return errors.New(name + ": duplicate symbol")
	}
	r.assetOf[a.ID] = int16(len(r.assets))
	r.assetIdx[a.Symbol] = len(r.assets)
	r.assets = append(r.assets, a)
	return nil
}

func (r *Registry) addMarket(s MarketSpec) error {
	name := "gateway: market " + strconv.Quote(s.Symbol)
	switch {
	case s.ID == 0 || s.ID > core.MaxMarkets:
		return errors.New(name + ": id out of range")
	case r.marketOf[s.ID] >= 0:
		return errors.New(name + ": duplicate id")
	case !validSymbol(s.Symbol, true):
		return errors.New(name + ": symbol must be 1-32 of A-Z, 0-9, '-', '_'")
	}
	if _, dup := r.mktIdx[s.Symbol]; dup {
		return errors.New(name + ": duplicate symbol")
	}
	base, okB := r.AssetByID(s.Cfg.Base)
	quote, okQ := r.AssetByID(s.Cfg.Quote)
	switch {
	case !okB || !okQ || base.ID == quote.ID:
		return errors.New(name + ": base and quote must be two registered assets")
	case s.Cfg.BaseScale != base.Scale:
		return errors.New(name + ": Cfg.BaseScale differs from the base asset's scale")
	case s.Cfg.Tick <= 0 || s.Cfg.Lot <= 0 || s.Cfg.MinQty <= 0 || s.Cfg.MaxQty < s.Cfg.MinQty:
		return errors.New(name + ": tick, lot, min and max quantity must be positive")
	}
	r.marketOf[s.ID] = int16(len(r.markets))
	r.mktIdx[s.Symbol] = len(r.markets)
	r.markets = append(r.markets, Market{ID: s.ID, Symbol: s.Symbol, Base: base, Quote: quote, Cfg: s.Cfg})
	return nil
}

func validSymbol(s string, market bool) bool {
	if len(s) == 0 || len(s) > MaxSymbolLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || market && (c == '-' || c == '_')) {
			return false
		}
	}
	return true
}

// sortedBy returns a copy of xs in ascending key order (insertion sort: the
// lists are a few dozen entries, read once at start-up).
func sortedBy[T any](xs []T, key func(T) uint64) []T {
	out := append([]T(nil), xs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && key(out[j]) < key(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Asset looks an asset up by symbol. The []byte form of the lookup
// (AssetBytes) does not allocate.
func (r *Registry) Asset(symbol string) (Asset, bool) {
	i, ok := r.assetIdx[symbol]
	if !ok {
		return Asset{}, false
	}
	return r.assets[i], true
}

// AssetBytes is Asset for a symbol held in a request buffer.
func (r *Registry) AssetBytes(symbol []byte) (Asset, bool) {
	i, ok := r.assetIdx[string(symbol)] // no allocation: the compiler elides the conversion
	if !ok {
		return Asset{}, false
	}
	return r.assets[i], true
}

// AssetByID looks an asset up by core id.
func (r *Registry) AssetByID(id core.AssetID) (Asset, bool) {
	if int(id) >= len(r.assetOf) || r.assetOf[id] < 0 {
		return Asset{}, false
	}
	return r.assets[r.assetOf[id]], true
}

// Market looks a market up by symbol.
func (r *Registry) Market(symbol string) (*Market, bool) {
	i, ok := r.mktIdx[symbol]
	if !ok {
		return nil, false
	}
	return &r.markets[i], true
}

// MarketBytes is Market for a symbol held in a request buffer; it does not allocate.
func (r *Registry) MarketBytes(symbol []byte) (*Market, bool) {
	i, ok := r.mktIdx[string(symbol)]
	if !ok {
		return nil, false
	}
	return &r.markets[i], true
}

// MarketByID looks a market up by core id. The *Market points into the
// registry: read it, never modify it.
func (r *Registry) MarketByID(id core.MarketID) (*Market, bool) {
	if int(id) >= len(r.marketOf) || r.marketOf[id] < 0 {
		return nil, false
	}
	return &r.markets[r.marketOf[id]], true
}

// Assets returns the registered assets in id order (a copy).
func (r *Registry) Assets() []Asset { return append([]Asset(nil), r.assets...) }

// Markets returns the registered markets in id order (a copy).
func (r *Registry) Markets() []Market { return append([]Market(nil), r.markets...) }

// ConfigCommands returns the commands that install this registry's assets
// and markets in a fresh core (both kinds are idempotent).
func (r *Registry) ConfigCommands() []core.Command {
	out := make([]core.Command, 0, len(r.assets)+len(r.markets))
	for _, a := range r.assets {
		out = append(out, core.Command{Kind: core.KindConfigAsset, Asset: a.ID, BaseScale: a.Scale})
	}
	for _, m := range r.markets {
		out = append(out, core.Command{Kind: core.KindConfigMarket, Market: m.ID, Cfg: m.Cfg})
	}
	return out
}
