package gateway

import (
	"errors"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

// TestP2PServiceConfig: the defaults are valid, off is always valid, and a
// hold outside [0, MaxP2PHold] or a tick <= 0 is refused; Scale finds the
// service's asset; StartP2P refuses an asset that is not configured.
func TestP2PServiceConfig(t *testing.T) {
	def := DefaultP2PService()
	if err := def.Validate(); err != nil || def.Asset != DefaultP2PAsset {
		t.Fatalf("defaults %+v: %v", def, err)
	}
	off := P2PServiceConfig{Hold: -1}
	if err := off.Validate(); err != nil {
		t.Fatalf("off: %v", err)
	}
	for _, bad := range []P2PServiceConfig{{Asset: "USD", Hold: -time.Second, Tick: time.Second},
		{Asset: "USD", Hold: time.Duration(core.MaxP2PHold) + 1, Tick: time.Second}, {Asset: "USD"}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	assets := []Asset{{ID: 1, Symbol: "USDT", Scale: 6}, {ID: 4, Symbol: "USD", Scale: 2}}
	if s := def.Scale(assets); s != 2 {
		t.Fatalf("scale %d, want 2", s)
	}
	reg, err := NewRegistry(assets, nil)
	if err != nil {
		t.Fatal(err)
	}
	eur := P2PServiceConfig{Asset: "EUR", Tick: time.Second}
	if _, _, err := StartP2P(eur, nil, reg, nil, nil); !errors.Is(err, ErrP2PAsset) {
		t.Fatalf("an unknown asset: %v", err)
	}
}
