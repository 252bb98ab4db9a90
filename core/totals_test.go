package core

import "testing"

// TestTotalsAndSpotOps pins the queries the internal-transfer invariant
// reads: AssetTotal (all balances of an asset), AdjustedTotal (net operator
// adjustments, rebuilt by Restore) and SpotOp (the recorded first result of
// an operation by req_id).
func TestTotalsAndSpotOps(t *testing.T) {
	p := New(Config{})
	seq := Seq(0)
	apply := func(c Command) Code {
		seq++
		c.Seq, c.Time = seq, int64(seq)
		for _, e := range p.Apply(&c) {
			if e.Kind == EvResult {
				return e.Code
			}
		}
		t.Fatalf("%v: no result event", c.Kind)
		return 0
	}
	key := func(s string) Key {
		k, ok := KeyFrom(s)
		if !ok {
			t.Fatalf("KeyFrom(%q)", s)
		}
		return k
	}
	if c := apply(Command{Kind: KindConfigAsset, Asset: 1, BaseScale: 6}); c != OK {
		t.Fatalf("config asset: %v", c)
	}
	steps := []struct {
		c    Command
		want Code
	}{
		{Command{Kind: KindSpotDeposit, User: 7, Asset: 1, Amount: 1000, Key: key("d1")}, OK},
		{Command{Kind: KindAdjust, User: 7, Asset: 1, Amount: 300, Key: key("a1")}, OK},
		{Command{Kind: KindAdjust, User: 7, Asset: 1, Amount: -100, Key: key("a2")}, OK},
		{Command{Kind: KindAdjust, User: 8, Asset: 1, Amount: -5, Key: key("a3")}, CodeInsufficientBalance},
		{Command{Kind: KindSpotWithdraw, User: 7, Asset: 1, Amount: 50, Key: key("w1")}, OK},
		{Command{Kind: KindSpotWithdraw, User: 7, Asset: 1, Amount: 1 << 40, Key: key("w2")}, CodeInsufficientBalance},
		{Command{Kind: KindAdjust, User: 7, Asset: 1, Amount: 300, Key: key("a1")}, OK}, // repeat: no change
	}
	for i, s := range steps {
		if got := apply(s.c); got != s.want {
			t.Fatalf("step %d %v: %v, want %v", i, s.c.Kind, got, s.want)
		}
	}
	check := func(p *Processor, when string) {
		t.Helper()
		if got := p.AssetTotal(1); got != 1000+300-100-50 {
			t.Errorf("%s: AssetTotal = %d, want 1150", when, got)
		}
		if got := p.AdjustedTotal(1); got != 200 {
			t.Errorf("%s: AdjustedTotal = %d, want 200", when, got)
		}
		if p.AssetTotal(2) != 0 || p.AdjustedTotal(0) != 0 || p.AssetTotal(MaxAssets+1) != 0 {
			t.Errorf("%s: unknown assets must total 0", when)
		}
		for _, c := range []struct {
			kind  Kind
			key   string
			code  Code
			found bool
		}{
			{KindSpotDeposit, "d1", OK, true},
			{KindSpotWithdraw, "w1", OK, true},
			{KindSpotWithdraw, "w2", CodeInsufficientBalance, true},
			{KindSpotRefund, "w1", 0, false},
			{KindSpotDeposit, "w1", 0, false},
		} {
			code, found := p.SpotOp(c.kind, key(c.key))
			if found != c.found || (found && code != c.code) {
				t.Errorf("%s: SpotOp(%v, %s) = %v, %v; want %v, %v", when, c.kind, c.key, code, found, c.code, c.found)
			}
		}
	}
	check(p, "live")
	r, err := Restore(Config{}, p.AppendSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	check(r, "restored")
}
