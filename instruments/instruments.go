// Package instruments is the venue's market configuration: its assets and
// spot markets (the built-in defaults or a --config file, validated by the
// gateway's registry rules and the core's own market checks), their
// internal-transfer settings, the check of a data dir's instruments against
// the configured ones before a start, and their installation in the core.
package instruments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// defaultAssets and defaultMarkets are the built-in config, so the server
// starts with no files. Ids are stable: they are baked into the WAL.
// testdata/default-config.json is the same config in the --config format.
var defaultAssets = []gateway.Asset{
	{ID: 1, Symbol: "USDT", Scale: 6},
	{ID: 2, Symbol: "BTC", Scale: 8},
	{ID: 3, Symbol: "ETH", Scale: 8},
	{ID: 4, Symbol: "USD", Scale: 2}, // the user-to-user transfer service's (--p2p-asset)
}

var defaultMarkets = []gateway.MarketSpec{
	// tick 0.01 USDT x lot 0.0001 BTC = 10^4 x 10^4 = 10^8 = 10^BaseScale: notionals are exact.
	{ID: 1, Symbol: "BTC-USDT", Cfg: core.MarketCfg{Base: 2, Quote: 1, BaseScale: 8, Tick: 10_000, Lot: 10_000,
		MinQty: 10_000, MaxQty: 1_000 * 100_000_000, MakerFee: 1_000, TakerFee: 2_000}},
	{ID: 2, Symbol: "ETH-USDT", Cfg: core.MarketCfg{Base: 3, Quote: 1, BaseScale: 8, Tick: 10_000, Lot: 10_000,
		MinQty: 10_000, MaxQty: 10_000 * 100_000_000, MakerFee: 1_000, TakerFee: 2_000}},
}

// defaultTransfer are the internal-transfer settings of the built-in assets
// (spec 000 §1.5.3-1.5.4): the asset's precision is its scale; amounts in
// asset units.
var defaultTransfer = []model.AssetConfig{
	{ID: 1, Symbol: "USDT", Precision: 6, MinTransfer: 10_000, MaxTransfer: 10_000_000 * 1_000_000,
		Status: model.AssetActive, InternalTransferEnabled: true}, // 0.01 .. 10M USDT
	{ID: 2, Symbol: "BTC", Precision: 8, MinTransfer: 1_000, MaxTransfer: 1_000 * 100_000_000,
		Status: model.AssetActive, InternalTransferEnabled: true}, // 0.00001 .. 1000 BTC
	{ID: 3, Symbol: "ETH", Precision: 8, MinTransfer: 10_000, MaxTransfer: 10_000 * 100_000_000,
		Status: model.AssetActive, InternalTransferEnabled: true}, // 0.0001 .. 10000 ETH
	{ID: 4, Symbol: "USD", Precision: 2, MinTransfer: 1, MaxTransfer: 10_000_000 * 100,
		Status: model.AssetActive, InternalTransferEnabled: true}, // 0.01 .. 10M USD
}

// TransferDefaults is the transfer config of an asset whose config file
// entry sets none of the transfer fields: any amount of at least one unit,
// enabled.
func TransferDefaults(a gateway.Asset) model.AssetConfig {
	return model.AssetConfig{ID: a.ID, Symbol: a.Symbol, Precision: int(a.Scale), MinTransfer: 1,
		Status: model.AssetActive, InternalTransferEnabled: true}
}

// Config is a set of instruments: the assets and spot markets, validated
// (gateway registry rules and the core's own market-config checks), and the
// assets' internal-transfer settings.
type Config struct {
	Assets  []gateway.Asset
	Markets []gateway.MarketSpec
	// TransferAssets are the assets' internal-transfer settings, one per
	// asset in Assets' order (nil: TransferDefaults for every asset).
	TransferAssets []model.AssetConfig
}

// Default returns a copy of the built-in config.
func Default() Config {
	return Config{Assets: append([]gateway.Asset(nil), defaultAssets...),
		Markets:        append([]gateway.MarketSpec(nil), defaultMarkets...),
		TransferAssets: append([]model.AssetConfig(nil), defaultTransfer...)}
}

// Transfer returns c's transfer settings, one per asset, defaulted when
// the config did not give them.
func (c Config) Transfer() []model.AssetConfig {
	if len(c.TransferAssets) == len(c.Assets) {
		return c.TransferAssets
	}
	out := make([]model.AssetConfig, len(c.Assets))
	for i, a := range c.Assets {
		out[i] = TransferDefaults(a)
	}
	return out
}

// Commands returns the commands that install the instruments in a fresh
// core: assets, then markets (they are idempotent, so re-applying them to a
// core that has them is harmless while no order rests).
func (c Config) Commands() []core.Command {
	return instrumentCommands(c.Assets, c.Markets)
}

// Check compares the instruments in the core (the data dir's)
// with the configured ones before anything is installed: an asset whose
// scale changed would mis-scale every amount by a power of ten at the
// edges, and an asset or market the config no longer defines would hold
// money and orders no endpoint can reach. Either refuses the start with the
// differences listed. Instruments the config adds are installed as usual.
// Binary markets are created through the API, so they are never in
// --config: they are skipped (else one DRAFT market would brick every later
// start, spot included). A configured spot market whose id a binary market
// holds is ErrBinaryCollision: installing it is impossible (the id is
// taken) and serving it would send spot orders to the binary book.
func Check(pl *journal.Pipeline, cfg Config) error {
	scales := map[core.AssetID]uint8{}
	for _, a := range cfg.Assets {
		scales[a.ID] = a.Scale
	}
	specs := map[core.MarketID]gateway.MarketSpec{}
	for _, m := range cfg.Markets {
		specs[m.ID] = m
	}
	var problems, collisions []string
	err := pl.Read(func(p *core.Processor) error {
		for _, id := range p.Assets() {
			have, _ := p.AssetScale(id)
			want, ok := scales[id]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("asset id %d (scale %d) is in the data dir but not in the config", id, have))
			case want != have:
				problems = append(problems, fmt.Sprintf("asset id %d has scale %d in the data dir, the config says %d", id, have, want))
			}
		}
		for _, m := range p.Markets() {
			want, ok := specs[m.ID]
			if b, bin := p.Binary(m.ID); bin {
				if ok {
					collisions = append(collisions, fmt.Sprintf("spot market %q has id %d, binary market %d (%s) in the data dir",
						want.Symbol, m.ID, m.ID, b.Status))
				}
				continue
			}
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("market id %d is in the data dir (%d resting orders) but not in the config", m.ID, m.Orders))
			case want.Cfg != m.Cfg:
				problems = append(problems, fmt.Sprintf("market id %d is %+v in the data dir, the config says %+v", m.ID, m.Cfg, want.Cfg))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var errs []error
	if len(collisions) > 0 {
		errs = append(errs, fmt.Errorf("%w (give the spot market an unused id): %s", ErrBinaryCollision, strings.Join(collisions, "; ")))
	}
	if len(problems) > 0 {
		errs = append(errs, fmt.Errorf("config: the instruments differ from the data dir's (start with the config it was created with): %s",
			strings.Join(problems, "; ")))
	}
	return errors.Join(errs...) // nil when both are empty
}

// ErrBinaryCollision refuses a start whose config defines a spot market
// under the id of a binary market in the data dir: market ids are one space
// for both kinds, and the binary market, created through the API, holds
// money and positions the config cannot know about.
var ErrBinaryCollision = errors.New("config: a configured spot market id is a binary market's in the data dir")

func instrumentCommands(assets []gateway.Asset, markets []gateway.MarketSpec) []core.Command {
	out := make([]core.Command, 0, len(assets)+len(markets))
	for _, a := range assets {
		out = append(out, core.Command{Kind: core.KindConfigAsset, Asset: a.ID, BaseScale: a.Scale})
	}
	for _, m := range markets {
		out = append(out, core.Command{Kind: core.KindConfigMarket, Market: m.ID, Cfg: m.Cfg})
	}
	return out
}

// MaxFileSize bounds the --config file.
const MaxFileSize = 1 << 20

// configFile is the --config format. Every field is required (pointers tell
// "absent" from zero); unknown fields and trailing data are errors.
// Decimals are strings, read at the asset's scale: tick at the quote asset's,
// lot, min_qty and max_qty at the base asset's. The asset's internal-transfer
// fields are the exception: optional, defaulting to min_transfer = one unit,
// no max_transfer, status ACTIVE, internal_transfer_enabled true, no
// daily_transfer_limit (amount per user per UTC day); the transfer
// precision is the scale.
//
//	{"assets":  [{"symbol": "USDT", "id": 1, "scale": 6,
//	              "min_transfer": "0.01", "max_transfer": "10000000",
//	              "status": "ACTIVE", "internal_transfer_enabled": true}, ...],
//	 "markets": [{"symbol": "BTC-USDT", "id": 1, "base": "BTC", "quote": "USDT",
//	              "tick": "0.01", "lot": "0.0001", "min_qty": "0.0001", "max_qty": "1000",
//	              "maker_fee_ppm": 1000, "taker_fee_ppm": 2000}, ...]}
type configFile struct {
	Assets  []configAsset  `json:"assets"`
	Markets []configMarket `json:"markets"`
}

type configAsset struct {
	Symbol string  `json:"symbol"`
	ID     *uint32 `json:"id"`
	Scale  *uint8  `json:"scale"`
	// Internal transfers (spec 000 §1.5.3-1.5.4), optional.
	MinTransfer             *string `json:"min_transfer"`
	MaxTransfer             *string `json:"max_transfer"`
	Status                  *string `json:"status"`
	InternalTransferEnabled *bool   `json:"internal_transfer_enabled"`
	DailyTransferLimit      *string `json:"daily_transfer_limit"` // per user per UTC day; absent = none
}

type configMarket struct {
	Symbol      string  `json:"symbol"`
	ID          *uint32 `json:"id"`
	Base        string  `json:"base"`
	Quote       string  `json:"quote"`
	Tick        string  `json:"tick"`
	Lot         string  `json:"lot"`
	MinQty      string  `json:"min_qty"`
	MaxQty      string  `json:"max_qty"`
	MakerFeePPM *int64  `json:"maker_fee_ppm"`
	TakerFeePPM *int64  `json:"taker_fee_ppm"`
}

// Load reads and validates a --config file (errors name the flag).
func Load(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return Config{}, fmt.Errorf("--config: %w", err)
	}
	if len(b) > MaxFileSize {
		return Config{}, fmt.Errorf("--config %s: larger than %d bytes", path, MaxFileSize)
	}
	c, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("--config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes the --config format strictly and validates it.
func Parse(b []byte) (Config, error) {
	assets, markets, cf, err := parseInstrumentFile(b)
	if err != nil {
		return Config{}, err
	}
	transfers := make([]model.AssetConfig, len(assets))
	for i, a := range assets {
		if transfers[i], err = parseTransferAsset(cf.Assets[i], a); err != nil {
			return Config{}, err
		}
	}
	return Config{Assets: assets, Markets: markets, TransferAssets: transfers}, nil
}

// parseTransferAsset reads an asset's optional internal-transfer fields.
func parseTransferAsset(ca configAsset, a gateway.Asset) (model.AssetConfig, error) {
	t := TransferDefaults(a)
	name := "assets " + strconv.Quote(a.Symbol)
	if ca.MinTransfer != nil {
		v, err := gateway.ParseUnits(*ca.MinTransfer, a.Scale)
		if err != nil {
			return t, fmt.Errorf("%s: min_transfer %q: %w", name, *ca.MinTransfer, err)
		}
		t.MinTransfer = core.Units(v)
	}
	if ca.MaxTransfer != nil {
		v, err := gateway.ParseUnits(*ca.MaxTransfer, a.Scale)
		if err != nil {
			return t, fmt.Errorf("%s: max_transfer %q: %w", name, *ca.MaxTransfer, err)
		}
		if v > int64(model.MaxTransferUnits) {
			return t, fmt.Errorf("%s: max_transfer above the overflow bound %d units", name, model.MaxTransferUnits)
		}
		t.MaxTransfer = core.Units(v)
	}
	if ca.DailyTransferLimit != nil {
		v, err := gateway.ParseUnits(*ca.DailyTransferLimit, a.Scale)
		if err != nil {
			return t, fmt.Errorf("%s: daily_transfer_limit %q: %w", name, *ca.DailyTransferLimit, err)
		}
		t.DailyAmountLimit = core.Units(v)
	}
	if t.MaxTransfer != 0 && t.MaxTransfer < t.MinTransfer {
		return t, fmt.Errorf("%s: max_transfer below min_transfer", name)
	}
	if ca.Status != nil {
		switch st := model.AssetStatus(*ca.Status); st {
		case model.AssetActive, model.AssetSuspended:
			t.Status = st
		default:
			return t, fmt.Errorf("%s: status %q: must be ACTIVE or SUSPENDED", name, *ca.Status)
		}
	}
	if ca.InternalTransferEnabled != nil {
		t.InternalTransferEnabled = *ca.InternalTransferEnabled
	}
	return t, nil
}

// parseInstrumentFile decodes the --config format strictly and validates
// its assets and markets.
func parseInstrumentFile(b []byte) ([]gateway.Asset, []gateway.MarketSpec, configFile, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil, configFile{}, errors.New("empty file")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var cf configFile
	if err := dec.Decode(&cf); err != nil {
		return nil, nil, configFile{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, configFile{}, errors.New("unexpected data after the JSON object")
	}
	if len(cf.Assets) == 0 {
		return nil, nil, configFile{}, errors.New("no assets")
	}
	assets := make([]gateway.Asset, 0, len(cf.Assets))
	bySymbol := map[string]gateway.Asset{}
	for i, a := range cf.Assets {
		name := "assets[" + strconv.Itoa(i) + "] " + strconv.Quote(a.Symbol)
		switch {
		case a.Symbol == "":
			return nil, nil, configFile{}, errors.New("assets[" + strconv.Itoa(i) + "]: symbol missing")
		case a.ID == nil:
			return nil, nil, configFile{}, errors.New(name + ": id missing")
		case a.Scale == nil:
			return nil, nil, configFile{}, errors.New(name + ": scale missing")
		case *a.Scale > gateway.MaxScale:
			return nil, nil, configFile{}, fmt.Errorf("%s: scale %d above %d", name, *a.Scale, gateway.MaxScale)
		}
		ga := gateway.Asset{ID: core.AssetID(*a.ID), Symbol: a.Symbol, Scale: *a.Scale}
		if _, dup := bySymbol[a.Symbol]; dup {
			return nil, nil, configFile{}, errors.New(name + ": duplicate symbol")
		}
		bySymbol[a.Symbol] = ga
		assets = append(assets, ga)
	}
	markets := make([]gateway.MarketSpec, 0, len(cf.Markets))
	for i, m := range cf.Markets {
		name := "markets[" + strconv.Itoa(i) + "] " + strconv.Quote(m.Symbol)
		if m.Symbol == "" {
			return nil, nil, configFile{}, errors.New("markets[" + strconv.Itoa(i) + "]: symbol missing")
		}
		if m.ID == nil {
			return nil, nil, configFile{}, errors.New(name + ": id missing")
		}
		base, okB := bySymbol[m.Base]
		quote, okQ := bySymbol[m.Quote]
		if !okB || !okQ {
			return nil, nil, configFile{}, fmt.Errorf("%s: base %q and quote %q must be symbols of configured assets", name, m.Base, m.Quote)
		}
		var vals [4]int64
		for j, d := range []struct {
			field, s string
			scale    uint8
		}{{"tick", m.Tick, quote.Scale}, {"lot", m.Lot, base.Scale}, {"min_qty", m.MinQty, base.Scale}, {"max_qty", m.MaxQty, base.Scale}} {
			if d.s == "" {
				return nil, nil, configFile{}, fmt.Errorf("%s: %s missing", name, d.field)
			}
			v, err := gateway.ParseUnits(d.s, d.scale)
			if err != nil {
				return nil, nil, configFile{}, fmt.Errorf("%s: %s %q at scale %d: %w", name, d.field, d.s, d.scale, err)
			}
			vals[j] = v
		}
		if m.MakerFeePPM == nil || m.TakerFeePPM == nil {
			return nil, nil, configFile{}, errors.New(name + ": maker_fee_ppm and taker_fee_ppm are required")
		}
		markets = append(markets, gateway.MarketSpec{ID: core.MarketID(*m.ID), Symbol: m.Symbol, Cfg: core.MarketCfg{
			Base: base.ID, Quote: quote.ID, BaseScale: base.Scale,
			Tick: core.Price(vals[0]), Lot: core.Units(vals[1]), MinQty: core.Units(vals[2]), MaxQty: core.Units(vals[3]),
			MakerFee: core.Rate(*m.MakerFeePPM), TakerFee: core.Rate(*m.TakerFeePPM),
		}})
	}
	if err := (Config{Assets: assets, Markets: markets}).Validate(); err != nil {
		return nil, nil, configFile{}, err
	}
	return assets, markets, cf, nil
}

// Validate applies the gateway registry's rules (ids, symbols,
// scales) and then the core's own: the config commands are applied to a
// scratch core, and each must succeed (lot multiples, fee limits, tick x lot
// a multiple of 10^BaseScale).
func (c Config) Validate() error {
	assets, markets := c.Assets, c.Markets
	if _, err := gateway.NewRegistry(assets, markets); err != nil {
		return err
	}
	p := core.New(core.Config{})
	for i, c := range instrumentCommands(assets, markets) {
		c.Seq = core.Seq(i + 1)
		evs := p.Apply(&c)
		if code := evs[len(evs)-1].Code; code != core.OK {
			if c.Kind == core.KindConfigAsset {
				return fmt.Errorf("asset %q rejected by the core: %v", assets[i].Symbol, code)
			}
			return fmt.Errorf("market %q rejected by the core: %v (lot multiples, fees <= %d ppm, tick x lot a multiple of 10^base scale)",
				markets[i-len(assets)].Symbol, code, core.MaxFeeRate)
		}
	}
	return nil
}
