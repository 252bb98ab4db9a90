package binaryshape

// binaryshape_test.go checks the generator's promises: a pure function of
// its Config, a stream that replays from its snapshot to the same state with
// the invariants holding, and the mix the package doc states — all four
// fill kinds, cancels of live orders, IOCs, and the refusals it means (and
// no others to speak of).

import (
	"bytes"
	"slices"
	"testing"

	"github.com/ubscore/ubscore/core"
)

var small = Config{Seed: 5, Commands: 40_000, Users: 1_000, TargetLive: 200}

func TestGenerateDeterministic(t *testing.T) {
	a, err := Generate(small)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(small)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Snap, b.Snap) || !slices.Equal(a.Cmds, b.Cmds) || a.EndHash != b.EndHash || a.Mix != b.Mix {
		t.Fatal("the same config gave two workloads")
	}
	cfg := small
	cfg.Seed++
	c, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a.Cmds, c.Cmds) || a.EndHash == c.EndHash {
		t.Fatal("another seed gave the same stream")
	}
}

func TestGenerateShape(t *testing.T) {
	w, err := Generate(small)
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.Start()
	if err != nil {
		t.Fatal(err)
	}
	if p.RestingOrders() != w.StartResting || w.StartResting < Markets*small.TargetLive {
		t.Fatalf("snapshot rests %d orders, workload says %d, want >= %d", p.RestingOrders(), w.StartResting,
			Markets*small.TargetLive)
	}
	var got Mix
	for i := range w.Cmds {
		c := &w.Cmds[i]
		ev := p.Apply(c)
		res := ev[len(ev)-1]
		switch {
		case c.Kind == core.KindCancelOrder:
			got.Cancels++
			if res.Code != core.OK {
				t.Fatalf("cmd %d: cancel of order %d: %v (cancels must name live orders)", i, c.OrderID, res.Code)
			}
		case c.Kind != core.KindPlaceOrder:
			t.Fatalf("cmd %d: kind %v", i, c.Kind)
		case c.Price%Tick != 0:
			got.BadPrice++
			if res.Code != core.CodeInvalidPrice {
				t.Fatalf("cmd %d: off-tick price: %v, want %v", i, res.Code, core.CodeInvalidPrice)
			}
		case c.Qty == Oversell:
			got.Oversell++
			if c.Side != core.Sell || res.Code != core.CodeInsufficientShares {
				t.Fatalf("cmd %d: oversized %v: %v, want a SELL refused with %v", i, c.Side, res.Code, core.CodeInsufficientShares)
			}
		case c.TIF == core.IOC:
			got.IOCs++
		default:
			got.Places++
		}
		if res.Code != core.OK {
			got.Rejected++
		}
		for j := range ev {
			if ev[j].Kind == core.EvTrade {
				got.Trades++
				got.Fills[ev[j].Flags]++
			}
		}
	}
	if got != w.Mix {
		t.Fatalf("replayed mix %+v, generated %+v", got, w.Mix)
	}
	if h := p.StateHash(); h != w.EndHash {
		t.Fatalf("replay ends at %s, generation at %s", h, w.EndHash)
	}
	if v := p.CheckInvariants(); len(v) != 0 {
		t.Fatalf("invariants: %+v", v)
	}
	n := float64(len(w.Cmds))
	t.Logf("%+v; resting %d -> %d", got, w.StartResting, w.EndResting)
	within := func(name string, v int, share float64) {
		if f := float64(v) / n; f < share*0.85 || f > share*1.15 {
			t.Errorf("%s: %.2f%% of commands, want ~%.0f%%", name, 100*f, 100*share)
		}
	}
	within("GTC limits", got.Places, 0.60)
	within("cancels", got.Cancels, 0.30)
	within("IOCs", got.IOCs, 0.08)
	within("off-tick refusals", got.BadPrice, 0.01)
	within("oversell refusals", got.Oversell, 0.01)
	for k := core.FillTransferYes; k <= core.FillBurn; k++ {
		if f := float64(got.Fills[k]) / float64(got.Trades); f < 0.15 {
			t.Errorf("fill kind %v: %d of %d trades", k, got.Fills[k], got.Trades)
		}
	}
	if got.Trades < len(w.Cmds)/10 {
		t.Errorf("%d trades in %d commands", got.Trades, len(w.Cmds))
	}
	if other := got.Rejected - got.BadPrice - got.Oversell; float64(other) > 0.01*n {
		t.Errorf("%d refusals beyond the meant ones", other)
	}
	if lo, hi := small.TargetLive, 4*small.TargetLive; w.EndResting < lo || w.EndResting > hi {
		t.Errorf("the books drifted: %d -> %d resting orders, want %d..%d", w.StartResting, w.EndResting, lo, hi)
	}
}

func TestGenerateConfig(t *testing.T) {
	for _, cfg := range []Config{{Users: 3}, {Users: -2}, {Commands: -1}, {TargetLive: -1}, {Users: core.MaxUsers}} {
		if _, err := Generate(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}
