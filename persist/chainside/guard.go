package chainside

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/persist/withdraw"
)

// The withdrawal guards' configuration (issue 33 items 3 and 6): the hot wallet's
// balance check and the default daily limits. Wiring only; the behaviour
// lives in persist/withdraw (hotwallet.go, limits.go).

// GuardConfig is part of Config.
type GuardConfig struct {
	BalanceInterval time.Duration // --chain-balance-interval: hot wallet balance refresh period
	BalanceMargin   string        // --chain-balance-margin: native coin (18 decimals) kept above what is pending
	Limits          string        // --chain-withdraw-limits: SYMBOL:DAILY_AMOUNT:DAILY_COUNT,... (0 = no limit)
}

func (g *GuardConfig) validate() error {
	if g.BalanceInterval <= 0 {
		return errors.New("--chain-balance-interval must be > 0")
	}
	if _, err := parseWei(g.BalanceMargin); err != nil {
		return fmt.Errorf("--chain-balance-margin: %w", err)
	}
	return nil
}

// parseWei parses a non-negative decimal of the native coin (18 decimals) exactly.
func parseWei(s string) (*big.Int, error) {
	i, f, _ := strings.Cut(s, ".")
	if i == "" || len(f) > 18 || strings.Trim(i+f, "0123456789") != "" {
		return nil, fmt.Errorf("%q: want a non-negative decimal with at most 18 decimals", s)
	}
	v, _ := new(big.Int).SetString(i+f+strings.Repeat("0", 18-len(f)), 10)
	return v, nil
}

// withdrawLimits parses --chain-withdraw-limits against the withdrawable assets.
func (g *GuardConfig) withdrawLimits(assets []withdraw.Asset) (map[core.AssetID]withdraw.Limit, error) {
	out := map[core.AssetID]withdraw.Limit{}
	if strings.TrimSpace(g.Limits) == "" {
		return out, nil
	}
	for _, spec := range strings.Split(g.Limits, ",") {
		f := strings.Split(strings.TrimSpace(spec), ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("--chain-withdraw-limits %q: want SYMBOL:DAILY_AMOUNT:DAILY_COUNT", spec)
		}
		var a *withdraw.Asset
		for i := range assets {
			if assets[i].Symbol == f[0] {
				a = &assets[i]
			}
		}
		if a == nil {
			return nil, fmt.Errorf("--chain-withdraw-limits %q: %s is not in --chain-assets", spec, f[0])
		}
		var l withdraw.Limit
		if f[1] != "0" {
			v, err := gateway.ParseUnits(f[1], uint8(a.Scale))
			if err != nil || v <= 0 {
				return nil, fmt.Errorf("--chain-withdraw-limits %q: bad amount", spec)
			}
			l.Amount = core.Units(v)
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--chain-withdraw-limits %q: bad count", spec)
		}
		l.Count = n
		out[a.ID] = l
	}
	return out, nil
}
