package gateway

// These tests prove that NewRegistry refuses inconsistent configurations,
// that lookups by name and id agree, and that every core reason code has a
// documented HTTP status in the 4xx/5xx range.

import (
	"testing"

	"github.com/ubscore/ubscore/core"
)

func TestRegistry(t *testing.T) {
	r := defaultRegistry(t)
	m, ok := r.Market("BTC-USDT")
	if !ok || m.ID != 1 || m.Base.Symbol != "BTC" || m.Quote.Symbol != "USDT" || m.Base.Scale != 8 || m.Quote.Scale != 6 {
		t.Fatalf("BTC-USDT: %+v", m)
	}
	if m2, ok := r.MarketByID(2); !ok || m2.Symbol != "ETH-USDT" {
		t.Fatalf("market 2: %+v", m2)
	}
	if m3, ok := r.MarketBytes([]byte("ETH-USDT")); !ok || m3.ID != 2 {
		t.Fatalf("ETH-USDT by bytes: %+v", m3)
	}
	for _, id := range []core.MarketID{0, 3, core.MaxMarkets, core.MaxMarkets + 1, 1 << 31} {
		if _, ok := r.MarketByID(id); ok {
			t.Fatalf("market %d found", id)
		}
	}
	if a, ok := r.Asset("USDT"); !ok || a.ID != 1 || a.Scale != 6 {
		t.Fatalf("USDT: %+v", a)
	}
	if _, ok := r.AssetByID(core.MaxAssets + 1); ok {
		t.Fatal("asset out of range found")
	}
	if len(r.Assets()) != 3 || len(r.Markets()) != 2 || len(r.ConfigCommands()) != 5 {
		t.Fatal("listing")
	}
	if n := testing.AllocsPerRun(100, func() { r.MarketBytes([]byte("BTC-USDT")); r.AssetBytes([]byte("BTC")) }); n != 0 {
		t.Fatalf("lookups allocate %v", n)
	}

	assets := []Asset{{1, "USDT", 6}, {2, "BTC", 8}}
	cfg := core.MarketCfg{Base: 2, Quote: 1, BaseScale: 8, Tick: 1, Lot: 1, MinQty: 1, MaxQty: 1}
	for name, c := range map[string]struct {
		a []Asset
		m []MarketSpec
	}{
		"asset id 0":         {[]Asset{{0, "X", 1}}, nil},
		"asset id too large": {[]Asset{{core.MaxAssets + 1, "X", 1}}, nil},
		"duplicate asset id": {[]Asset{{1, "X", 1}, {1, "Y", 1}}, nil},
		"duplicate symbol":   {[]Asset{{1, "X", 1}, {2, "X", 1}}, nil},
		"lower-case symbol":  {[]Asset{{1, "usdt", 1}}, nil},
		"empty symbol":       {[]Asset{{1, "", 1}}, nil},
		"scale too large":    {[]Asset{{1, "X", MaxScale + 1}}, nil},
		"market id 0":        {assets, []MarketSpec{{0, "BTC-USDT", cfg}}},
		"duplicate market":   {assets, []MarketSpec{{1, "BTC-USDT", cfg}, {2, "BTC-USDT", cfg}}},
		"bad market symbol":  {assets, []MarketSpec{{1, "BTC/USDT", cfg}}},
		"unknown base":       {assets, []MarketSpec{{1, "ETH-USDT", core.MarketCfg{Base: 3, Quote: 1, BaseScale: 8, Tick: 1, Lot: 1, MinQty: 1, MaxQty: 1}}}},
		"base == quote":      {assets, []MarketSpec{{1, "BTC-BTC", core.MarketCfg{Base: 2, Quote: 2, BaseScale: 8, Tick: 1, Lot: 1, MinQty: 1, MaxQty: 1}}}},
		"scale mismatch":     {assets, []MarketSpec{{1, "BTC-USDT", core.MarketCfg{Base: 2, Quote: 1, BaseScale: 6, Tick: 1, Lot: 1, MinQty: 1, MaxQty: 1}}}},
		"zero tick":          {assets, []MarketSpec{{1, "BTC-USDT", core.MarketCfg{Base: 2, Quote: 1, BaseScale: 8, Lot: 1, MinQty: 1, MaxQty: 1}}}},
	} {
		if _, err := NewRegistry(c.a, c.m); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCoreStatusTable(t *testing.T) {
	for _, c := range core.Codes() {
		if c == core.OK {
			continue
		}
		e := coreError(c)
		if e.Code != c.String() || e.Message == "" || e.Status < 400 || e.Status > 599 {
			t.Errorf("%v: %+v", c, e)
		}
		if _, ok := coreStatus[c]; !ok {
			t.Errorf("%v has no entry in coreStatus", c)
		}
	}
	for code, status := range map[core.Code]int{core.CodeInvalidPrice: 400, core.CodeOrderNotFound: 404,
		core.CodeInsufficientBalance: 409, core.CodeMarketHalted: 409, core.CodeCoreHalted: 503} {
		if coreError(code).Status != status {
			t.Errorf("%v: %d, want %d", code, coreError(code).Status, status)
		}
	}
	// The gateway's own spellings of core codes are the core's.
	for gw, c := range map[string]core.Code{CodeInvalidMarket: core.CodeInvalidMarket, CodeInvalidAsset: core.CodeInvalidAsset,
		CodeInvalidUser: core.CodeInvalidUser, CodeInvalidSide: core.CodeInvalidSide, CodeInvalidOrderType: core.CodeInvalidOrderType,
		CodeInvalidTimeInForce: core.CodeInvalidTimeInForce, CodeInvalidPrice: core.CodeInvalidPrice,
		CodeInvalidQuantity: core.CodeInvalidQuantity, CodeQuantityTooSmall: core.CodeQuantityTooSmall,
		CodeQuantityTooLarge: core.CodeQuantityTooLarge, CodeInvalidKey: core.CodeInvalidKey, CodeInvalidStatus: core.CodeInvalidStatus,
		CodeNothingToModify: core.CodeNothingToModify, CodeOrderNotFound: core.CodeOrderNotFound,
		CodeInvalidAmount: core.CodeInvalidAmount, CodeOverflow: core.CodeOverflow} {
		if gw != c.String() {
			t.Errorf("gateway %q != core %q", gw, c.String())
		}
	}
}
