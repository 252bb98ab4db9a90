package instruments

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// The built-in config is baked into existing WALs: it must never change.
func TestDefaultConfigCommandsUnchanged(t *testing.T) {
	want := []core.Command{
		{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 6},
		{Kind: core.KindConfigAsset, Asset: 2, BaseScale: 8},
		{Kind: core.KindConfigAsset, Asset: 3, BaseScale: 8},
		{Kind: core.KindConfigAsset, Asset: 4, BaseScale: 2}, // USD (issue 23); data dirs from before get it from gateway.StartP2P
		{Kind: core.KindConfigMarket, Market: 1, Cfg: core.MarketCfg{Base: 2, Quote: 1, BaseScale: 8, Tick: 10_000, Lot: 10_000,
			MinQty: 10_000, MaxQty: 1_000 * 100_000_000, MakerFee: 1_000, TakerFee: 2_000}},
		{Kind: core.KindConfigMarket, Market: 2, Cfg: core.MarketCfg{Base: 3, Quote: 1, BaseScale: 8, Tick: 10_000, Lot: 10_000,
			MinQty: 10_000, MaxQty: 10_000 * 100_000_000, MakerFee: 1_000, TakerFee: 2_000}},
	}
	if got := Default().Commands(); !reflect.DeepEqual(got, want) {
		t.Fatalf("default config commands changed:\n%+v", got)
	}
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

// testdata/default-config.json documents the format: it is the built-in config.
func TestConfigFileMatchesDefault(t *testing.T) {
	cfg, err := Load("testdata/default-config.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Assets, defaultAssets) || !reflect.DeepEqual(cfg.Markets, defaultMarkets) {
		t.Fatalf("file config differs from the built-in one:\n%+v\n%+v", cfg.Assets, cfg.Markets)
	}
	if !reflect.DeepEqual(cfg.TransferAssets, defaultTransfer) {
		t.Fatalf("file transfer config differs from the built-in one:\n%+v\n%+v", cfg.TransferAssets, defaultTransfer)
	}
	if def := Default(); !reflect.DeepEqual(def.Transfer(), defaultTransfer) {
		t.Fatalf("built-in transfer config: %+v", def.Transfer())
	}
	noTransfer := Default()
	noTransfer.TransferAssets = nil
	for i, tc := range noTransfer.Transfer() {
		if want := TransferDefaults(defaultAssets[i]); tc != want {
			t.Fatalf("asset %d without transfer settings: %+v, want %+v", i, tc, want)
		}
	}
}

// An asset without transfer fields gets TransferDefaults; given fields are read at the asset's scale.
func TestConfigFileTransferFields(t *testing.T) {
	body := `{"assets": [{"symbol": "EUR", "id": 10, "scale": 2},
	                     {"symbol": "SOL", "id": 11, "scale": 4, "min_transfer": "0.5", "max_transfer": "100",
	                      "status": "SUSPENDED", "internal_transfer_enabled": false, "daily_transfer_limit": "250"}], "markets": []}`
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []model.AssetConfig{
		{ID: 10, Symbol: "EUR", Precision: 2, MinTransfer: 1, Status: model.AssetActive, InternalTransferEnabled: true},
		{ID: 11, Symbol: "SOL", Precision: 4, MinTransfer: 5_000, MaxTransfer: 1_000_000, Status: model.AssetSuspended,
			DailyAmountLimit: 2_500_000},
	}
	if !reflect.DeepEqual(cfg.TransferAssets, want) {
		t.Fatalf("got  %+v\nwant %+v", cfg.TransferAssets, want)
	}
}

func TestConfigFileRejects(t *testing.T) {
	good, err := os.ReadFile("testdata/default-config.json")
	if err != nil {
		t.Fatal(err)
	}
	// edit returns the default file with old replaced by new (old must occur).
	edit := func(old, new string) string {
		if !strings.Contains(string(good), old) {
			t.Fatalf("%q not in the default file", old)
		}
		return strings.Replace(string(good), old, new, 1)
	}
	for name, body := range map[string]string{
		"empty":                    ``,
		"not an object":            `[]`,
		"null":                     `null`,
		"no assets":                `{"assets": [], "markets": []}`,
		"unknown top-level field":  `{"assets": [{"symbol": "USDT", "id": 1, "scale": 6}], "fees": 1}`,
		"unknown asset field":      edit(`"scale": 6,`, `"scale": 6, "decimals": 6,`),
		"min_transfer too precise": edit(`"min_transfer": "0.01"`, `"min_transfer": "0.0000001"`),
		"min_transfer negative":    edit(`"min_transfer": "0.01"`, `"min_transfer": "-1"`),
		"min_transfer as number":   edit(`"min_transfer": "0.01"`, `"min_transfer": 0.01`),
		"max_transfer below min":   edit(`"max_transfer": "10000000"`, `"max_transfer": "0.001"`),
		"max_transfer overflow":    edit(`"max_transfer": "10000000"`, `"max_transfer": "9000000000000"`),
		"asset status unknown":     edit(`"status": "ACTIVE"`, `"status": "DELISTED"`),
		"transfer flag as string":  edit(`"internal_transfer_enabled": true`, `"internal_transfer_enabled": "yes"`),
		"unknown market field":     edit(`"taker_fee_ppm": 2000}`, `"taker_fee_ppm": 2000, "halted": true}`),
		"trailing data":            string(good) + `{}`,
		"asset id missing":         edit(`"id": 1, "scale": 6`, `"scale": 6`),
		"asset scale missing":      edit(`"id": 1, "scale": 6`, `"id": 1`),
		"asset scale too big":      edit(`"scale": 6`, `"scale": 19`),
		"asset id 0":               edit(`"id": 1, "scale": 6`, `"id": 0, "scale": 6`),
		"asset id too big":         edit(`"id": 1, "scale": 6`, `"id": 65, "scale": 6`),
		"negative id":              edit(`"id": 1, "scale": 6`, `"id": -1, "scale": 6`),
		"duplicate asset id":       edit(`"id": 2, "scale": 8`, `"id": 1, "scale": 8`),
		"duplicate asset symbol":   edit(`"symbol": "ETH"`, `"symbol": "BTC"`),
		"bad asset symbol":         `{"assets": [{"symbol": "eth", "id": 1, "scale": 8}]}`,
		"unknown base":             edit(`"base": "ETH"`, `"base": "DOGE"`),
		"base equals quote":        edit(`"base": "ETH"`, `"base": "USDT"`),
		"tick as number":           edit(`"tick": "0.01"`, `"tick": 0.01`),
		"tick too precise":         edit(`"tick": "0.01"`, `"tick": "0.0000001"`),
		"tick zero":                edit(`"tick": "0.01"`, `"tick": "0"`),
		"tick negative":            edit(`"tick": "0.01"`, `"tick": "-0.01"`),
		"tick missing":             edit(`"tick": "0.01", `, ``),
		"lot missing":              edit(`"lot": "0.0001", `, ``),
		"min not a lot multiple":   edit(`"min_qty": "0.0001"`, `"min_qty": "0.00015"`),
		"max below min":            edit(`"max_qty": "1000"`, `"max_qty": "0.00001"`),
		"tick x lot inexact":       edit(`"tick": "0.01"`, `"tick": "0.000001"`),
		"fee too high":             edit(`"maker_fee_ppm": 1000`, `"maker_fee_ppm": 100001`),
		"fee negative":             edit(`"maker_fee_ppm": 1000`, `"maker_fee_ppm": -1`),
		"fee missing":              edit(`"maker_fee_ppm": 1000, `, ``),
		"duplicate market id":      edit(`"id": 2, "base"`, `"id": 1, "base"`),
		"market symbol missing":    edit(`"symbol": "ETH-USDT", `, ``),
		"bad market symbol":        edit(`"symbol": "ETH-USDT"`, `"symbol": "ETH/USDT"`),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.json")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(path); err == nil {
				t.Fatalf("accepted:\n%s", body)
			} else {
				t.Log(err)
			}
		})
	}
}

// A custom file with other instruments is accepted and installed as given.
func TestConfigFileCustom(t *testing.T) {
	body := `{"assets": [{"symbol": "EUR", "id": 10, "scale": 2}, {"symbol": "SOL", "id": 11, "scale": 4}],
	          "markets": [{"symbol": "SOL_EUR", "id": 7, "base": "SOL", "quote": "EUR", "tick": "0.01", "lot": "1",
	                       "min_qty": "2", "max_qty": "5000", "maker_fee_ppm": 0, "taker_fee_ppm": 500}]}`
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := gateway.MarketSpec{ID: 7, Symbol: "SOL_EUR", Cfg: core.MarketCfg{Base: 11, Quote: 10, BaseScale: 4,
		Tick: 1, Lot: 10_000, MinQty: 20_000, MaxQty: 50_000_000, MakerFee: 0, TakerFee: 500}}
	if len(cfg.Markets) != 1 || cfg.Markets[0] != want || len(cfg.Assets) != 2 || len(cfg.Commands()) != 3 {
		t.Fatalf("got %+v %+v", cfg.Assets, cfg.Markets)
	}
}
