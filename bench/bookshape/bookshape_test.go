package bookshape

// bookshape_test.go checks the generator's promises: a pure function of its
// Config, dense ids in message order, every cancel and modify after its
// order, and the mix the package doc states.

import (
	"slices"
	"testing"
)

func TestGenerateDeterministic(t *testing.T) {
	cfg := Config{Seed: 7, Orders: 20_000, Scenario: FlashCrash}
	a, b := Generate(cfg), Generate(cfg)
	if !slices.Equal(a, b) {
		t.Fatal("the same config gave two streams")
	}
	cfg.Seed++
	if slices.Equal(a, Generate(cfg)) {
		t.Fatal("another seed gave the same stream")
	}
}

func TestGenerateShape(t *testing.T) {
	for _, sc := range Scenarios {
		t.Run(sc.String(), func(t *testing.T) {
			const n = 50_000
			msgs := Generate(Config{Seed: 23, Orders: n, Scenario: sc})
			seen := make([]bool, n+1)
			next := uint32(1)
			for i, m := range msgs {
				switch m.Kind {
				case New:
					if m.ID != next {
						t.Fatalf("msg %d: new order id %d, want %d (dense, in order)", i, m.ID, next)
					}
					next++
					seen[m.ID] = true
					if m.Qty < 1 || m.Qty > MaxQty || m.Price < 1 {
						t.Fatalf("msg %d: %+v out of range", i, m)
					}
				case Cancel, Modify:
					if m.ID == 0 || m.ID > n || !seen[m.ID] {
						t.Fatalf("msg %d: %v of order %d before the order", i, m.Kind, m.ID)
					}
				default:
					t.Fatalf("msg %d: kind %d", i, m.Kind)
				}
			}
			c := Count(msgs)
			within := func(name string, got int, want float64) {
				if f := float64(got); f < want*0.9 || f > want*1.1 {
					t.Errorf("%s: %d, want ~%.0f", name, got, want)
				}
			}
			gtc := float64(n) * (1 - iocShare)
			within("new", c.New, n)
			within("ioc", c.IOC, n*iocShare)
			within("cancels", c.Cancel, gtc*cancelShare*(1+dupCancel))
			within("modifies", c.Modify, gtc*modifyShare)
			if span := c.MaxPrice - c.MinPrice; span > 2*MaxDepth+80_000 || span < MaxDepth {
				t.Errorf("prices span %d ticks", span)
			}
		})
	}
}

func TestParseScenario(t *testing.T) {
	for _, sc := range Scenarios {
		if got, ok := ParseScenario(sc.String()); !ok || got != sc {
			t.Errorf("%v does not round-trip", sc)
		}
	}
	if _, ok := ParseScenario("static"); ok {
		t.Error("an unknown name parsed")
	}
}
