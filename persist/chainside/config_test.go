package chainside

import (
	"strings"
	"testing"
)

// TestConfigValidate: off is always valid; on, the defaults with a node and
// a key file are valid, and each bad setting is refused naming its flag.
func TestConfigValidate(t *testing.T) {
	off := Config{}
	if err := off.Validate(); err != nil {
		t.Fatalf("chain side off: %v", err)
	}
	on := func() Config { c := Default(); c.RPC, c.KeyFile = "http://127.0.0.1:8545", "key"; return c }
	if c := on(); c.Validate() != nil {
		t.Fatalf("defaults: %v", c.Validate())
	}
	for flag, mod := range map[string]func(*Config){
		"--chain-key-file":         func(c *Config) { c.KeyFile = "" },
		"--chain-lease":            func(c *Config) { c.Lease = 0 },
		"--chain-resubmit-max":     func(c *Config) { c.ResubmitMax = c.Resubmit - 1 },
		"--chain-stuck-action":     func(c *Config) { c.StuckAction = "FOO" },
		"--chain-balance-interval": func(c *Config) { c.Guard.BalanceInterval = 0 },
		"--chain-balance-margin":   func(c *Config) { c.Guard.BalanceMargin = "-1" },
	} {
		c := on()
		mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: %v", flag, err)
		}
	}
}
