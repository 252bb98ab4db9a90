package core

// accounts_test.go proves that where an asset's balances are stored (inside
// the account for ids 1..inlineAssets, in the overflow run above) changes
// nothing: a random stream replayed with its asset ids relabelled to high
// ids gives the same events (relabelled), the same balances, a clean
// invariant check, and a snapshot that restores to the same state hash.

import (
	"slices"
	"testing"
	"unsafe"
)

// relabel is a permutation of asset ids: the generator's assets 1..3 move
// to overflow ids (and back), every other id (0, 4, unconfigured, out of
// range) stays, so invalid commands stay invalid in the same way.
func relabel(a AssetID) AssetID {
	switch a {
	case 1:
		return MaxAssets
	case MaxAssets:
		return 1
	case 2:
		return inlineAssets + 2
	case inlineAssets + 2:
		return 2
	case 3:
		return 40
	case 40:
		return 3
	}
	return a
}

func relabelCommand(c Command) Command {
	c.Asset = relabel(c.Asset)
	if c.Kind == KindConfigMarket {
		c.Cfg.Base, c.Cfg.Quote = relabel(c.Cfg.Base), relabel(c.Cfg.Quote)
	}
	return c
}

func TestHighAssetIDsBehaveAsLowOnes(t *testing.T) {
	seed := propSeed(t)
	g := newGen(seed, propProfile())
	low, high := New(Config{}), New(Config{})
	n := g.setupLen() + propCmds(50_000, 10_000)
	var c Command
	var bl, bh []AssetBalance
	for i := 0; i < n; i++ {
		g.next(&c)
		hc := relabelCommand(c)
		evl := low.Apply(&c)
		evh := high.Apply(&hc)
		if len(evl) != len(evh) {
			t.Fatalf("seed %d seq %d: %d events with low asset ids, %d with high ones", seed, c.Seq, len(evl), len(evh))
		}
		for j := range evl {
			e := evl[j]
			e.Asset = relabel(e.Asset)
			if e != evh[j] {
				t.Fatalf("seed %d seq %d event %d:\n  low  %+v\n  high %+v", seed, c.Seq, j, evl[j], evh[j])
			}
		}
		g.observe(evl)
		if i%512 == 0 || c.Kind != KindPlaceOrder && c.Kind != KindCancelOrder && c.Kind != KindModifyOrder {
			u := c.User
			bl, bh = low.Balances(u, bl[:0]), high.Balances(u, bh[:0])
			for k := range bl {
				bl[k].Asset = relabel(bl[k].Asset)
			}
			slices.SortFunc(bl, func(a, b AssetBalance) int { return int(a.Asset) - int(b.Asset) })
			if !slices.Equal(bl, bh) {
				t.Fatalf("seed %d seq %d user %d balances:\n  low  %+v\n  high %+v", seed, c.Seq, u, bl, bh)
			}
		}
	}
	if v := high.CheckInvariants(); len(v) != 0 {
		t.Fatalf("seed %d: invariants with high asset ids: %+v", seed, v)
	}
	if len(high.balExt[high.accountIdx(g.users[0].id)]) == 0 {
		t.Fatal("the relabelled stream never used the overflow balances")
	}
	for a := AssetID(1); a <= MaxAssets; a++ {
		if low.AssetTotal(a) != high.AssetTotal(relabel(a)) {
			t.Fatalf("seed %d asset %d: total %d, relabelled %d", seed, a, low.AssetTotal(a), high.AssetTotal(relabel(a)))
		}
	}
	restored := mustRestore(t, high.AppendSnapshot(nil))
	if h, want := restored.StateHash(), high.StateHash(); h != want {
		t.Fatalf("seed %d: restored state hash %s, live %s", seed, h, want)
	}
}

// TestMoveBrokenBalance drives move's cold path directly (no valid command
// reaches it): a debit below zero or an overflow records a failed
// balance-level check (NEGATIVE_BALANCE, the core's breaker) for finish to
// roll the command back, and still stores and reports the move, with 0 for
// an overflowed field; a clean move records nothing.
func TestMoveBrokenBalance(t *testing.T) {
	for _, tc := range []struct {
		name          string
		start         Balance
		dAvail, dFroz Units
		want          Balance
		wantBroken    bool
	}{
		{"clean", Balance{10, 5}, -10, -5, Balance{0, 0}, false},
		{"negative avail", Balance{10, 5}, -11, 0, Balance{-1, 5}, true},
		{"negative frozen", Balance{10, 5}, 0, -6, Balance{10, -1}, true},
		{"overflow avail", Balance{MaxUnits, 0}, 1, 0, Balance{0, 0}, true},
		{"overflow frozen", Balance{1, MaxUnits - 1}, -1, 2, Balance{0, 0}, true},
	} {
		p := New(Config{})
		a := p.ensureAccount(7)
		*p.balanceRef(a, 2) = tc.start
		p.events = p.events[:0]
		p.move(a, 2, tc.dAvail, tc.dFroz)
		if got := p.balance(a, 2); got != tc.want {
			t.Errorf("%s: balance %+v, want %+v", tc.name, got, tc.want)
		}
		want := Rollback{}
		if tc.wantBroken {
			want = Rollback{Reason: ReasonNegativeBalance, Asset: 2, Detail: ViolNegativeBalance}
		}
		if p.broken != want {
			t.Errorf("%s: broken %+v, want %+v", tc.name, p.broken, want)
		}
		if len(p.events) != 1 || p.events[0].Kind != EvBalance || p.events[0].User != 7 ||
			p.events[0].DAvail != tc.dAvail || p.events[0].DFrozen != tc.dFroz || p.Halted() {
			t.Errorf("%s: events %+v, halted %v", tc.name, p.events, p.Halted())
		}
	}
}

// TestAccountIsOneCacheLine pins what inlineAssets' comment promises.
func TestAccountIsOneCacheLine(t *testing.T) {
	if s := unsafe.Sizeof(account{}); s != 64 {
		t.Fatalf("account is %d bytes, want 64", s)
	}
}

// TestOrderLayout pins order's comment: 128 bytes, and the fields a cancel
// and a fill use within the first 64.
func TestOrderLayout(t *testing.T) {
	var o order
	if s := unsafe.Sizeof(o); s != 128 {
		t.Fatalf("order is %d bytes, want 128", s)
	}
	if end := unsafe.Offsetof(o.byQuote) + 1; end > 64 {
		t.Fatalf("order's hot fields end at byte %d, want <= 64", end)
	}
}
