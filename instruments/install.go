package instruments

import (
	"fmt"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// Install installs the configured markets the core does not have yet (all
// of them on a fresh data dir; the rest after a crash in the middle of a
// first start), with their assets (configuring an asset again with the same
// scale is a no-op). It returns how many markets it installed. Markets the
// core already has are never reconfigured: Check has refused to start with
// a config that changes or removes any.
func Install(pl *journal.Pipeline, cfg Config) (int, error) {
	have := map[core.MarketID]bool{}
	if err := pl.Read(func(p *core.Processor) error {
		for _, m := range p.Markets() {
			have[m.ID] = true
		}
		return nil
	}); err != nil {
		return 0, err
	}
	var cmds []core.Command
	n := 0
	for _, c := range cfg.Commands() {
		if c.Kind == core.KindConfigMarket {
			if have[c.Market] {
				continue
			}
			n++
		}
		cmds = append(cmds, c)
	}
	if n == 0 {
		return 0, nil
	}
	r := journal.NewReply()
	for _, c := range cmds {
		if _, err := pl.Submit(&c, r); err != nil {
			return 0, err
		}
		if err := pl.Wait(r); err != nil {
			return 0, err
		}
		if res := r.Result(); res.Code != core.OK {
			return 0, fmt.Errorf("config: %v: %v", c.Kind, res.Code)
		}
	}
	return n, nil
}
