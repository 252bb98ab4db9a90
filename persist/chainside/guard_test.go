package chainside

// The withdrawal guards' flags parse exactly or refuse: the margin in wei
// (18 decimals, no float), the default limits against --chain-assets.

import (
	"testing"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/withdraw"
)

func TestChainGuardFlags(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "0.01": "10000000000000000", "1": "1000000000000000000",
		"12.000000000000000001": "12000000000000000001"} {
		if v, err := parseWei(in); err != nil || v.String() != want {
			t.Errorf("parseWei(%q) = %v, %v; want %s", in, v, err, want)
		}
	}
	for _, in := range []string{"", "-1", ".5", "1e3", "0.0000000000000000001", "1,5", "abc"} {
		if v, err := parseWei(in); err == nil {
			t.Errorf("parseWei(%q) = %v, want an error", in, v)
		}
	}
	assets := []withdraw.Asset{{Symbol: "ETH", ID: 3, Scale: 8, ChainDecimals: 18}}
	g := GuardConfig{Limits: "ETH:0.5:3"}
	l, err := g.withdrawLimits(assets)
	if err != nil || l[core.AssetID(3)] != (withdraw.Limit{Amount: 50_000_000, Count: 3}) {
		t.Fatalf("ETH:0.5:3 -> %+v %v", l, err)
	}
	g.Limits = "ETH:0:0"
	if l, err := g.withdrawLimits(assets); err != nil || l[3] != (withdraw.Limit{}) {
		t.Fatalf("ETH:0:0 -> %+v %v", l, err)
	}
	for _, bad := range []string{"BTC:1:1", "ETH:x:1", "ETH:1", "ETH:1:-1", "ETH:-1:1", "ETH:0.000000001:1"} {
		g.Limits = bad
		if _, err := g.withdrawLimits(assets); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
