package bench

// These tests prove the workload's contract by running it through a real
// core.Processor: every place is accepted with exactly the order id the
// workload predicts, cancels mostly hit live orders, the books stay bounded,
// invariants hold, and the same seed always reaches the same state hash
// whatever order the commands were generated in.

import (
	"math/rand/v2"
	"testing"

	"github.com/ubscore/ubscore/core"
)

const fixedTime = 1_700_000_000_000_000_000

// runStats is what one run through the processor observed.
type runStats struct {
	hash                   string
	places, cancels, miss  int
	takerFills, violations int
}

// testOptions keeps -short runs small: the invariants build tag checks the
// touched book after every command, which costs O(book).
func testOptions(t *testing.T) (Options, int) {
	if testing.Short() {
		return Options{Users: 1_000, SeedPerBook: 200}, 40_000
	}
	return Options{}, 400_000
}

func runWorkload(t *testing.T, seed uint64, opts Options, steady int) (*core.Processor, runStats) {
	t.Helper()
	w, err := NewWorkload(seed, opts)
	if err != nil {
		t.Fatal(err)
	}
	p := core.New(core.Config{})
	var st runStats
	var c core.Command
	n := core.Seq(w.SetupLen() + steady)
	for seq := core.Seq(1); seq <= n; seq++ {
		w.Fill(seq, &c)
		c.Seq, c.Time = seq, fixedTime
		evs := p.Apply(&c)
		res := evs[len(evs)-1]
		for i := range evs {
			switch evs[i].Kind {
			case core.EvInvariantViolation:
				st.violations++
			case core.EvTrade:
				st.takerFills++
			}
		}
		switch c.Kind {
		case core.KindPlaceOrder:
			st.places++
			want, ok := w.OrderIDAt(seq)
			if !ok || res.Code != core.OK || res.OrderID != want {
				t.Fatalf("seed %d seq %d: place %+v -> %v order %d, want OK order %d (predicted=%v)",
					seed, seq, c, res.Code, res.OrderID, want, ok)
			}
		case core.KindCancelOrder:
			st.cancels++
			switch res.Code {
			case core.OK:
			case core.CodeOrderNotFound:
				st.miss++
			default:
				t.Fatalf("seed %d seq %d: cancel -> %v", seed, seq, res.Code)
			}
		default:
			if _, ok := w.OrderIDAt(seq); ok || res.Code != core.OK {
				t.Fatalf("seed %d seq %d: %v -> %v (predicted place=%v)", seed, seq, c.Kind, res.Code, ok)
			}
		}
	}
	st.hash = p.StateHash()
	return p, st
}

func TestWorkloadPredictsOrderIDsAndCancelsHit(t *testing.T) {
	opts, steady := testOptions(t)
	const seed = 7
	p, st := runWorkload(t, seed, opts, steady)
	if v := p.CheckInvariants(); len(v) != 0 || st.violations != 0 || p.Halted() {
		t.Fatalf("seed %d: invariants %+v, %d violation events, halted=%v", seed, v, st.violations, p.Halted())
	}
	missRate := float64(st.miss) / float64(st.cancels)
	t.Logf("seed %d: %d places, %d cancels, %.1f%% ORDER_NOT_FOUND, %d trades", seed, st.places, st.cancels,
		100*missRate, st.takerFills)
	if missRate >= 0.20 {
		t.Fatalf("seed %d: %.1f%% of cancels missed, want < 20%%", seed, 100*missRate)
	}
	if st.takerFills == 0 {
		t.Fatalf("seed %d: no trades", seed)
	}
	w, _ := NewWorkload(seed, opts)
	for _, m := range p.Markets() {
		per := w.Options().SeedPerBook
		if m.Orders < int32(per/2) || m.Orders > int32(4*per) {
			t.Fatalf("seed %d: market %d rests %d orders; want the book to stay near %d", seed, m.ID, m.Orders, per)
		}
	}
}

func TestWorkloadSameSeedSameHash(t *testing.T) {
	opts, steady := testOptions(t)
	steady /= 4
	_, a := runWorkload(t, 42, opts, steady)
	_, b := runWorkload(t, 42, opts, steady)
	_, c := runWorkload(t, 43, opts, steady)
	if a.hash != b.hash {
		t.Fatalf("seed 42: hashes differ: %s vs %s", a.hash, b.hash)
	}
	if a.hash == c.hash {
		t.Fatal("seeds 42 and 43 reached the same state")
	}
}

// TestWorkloadFillIsPure fills seqs in a shuffled order from a fresh
// workload and compares with the in-order commands.
func TestWorkloadFillIsPure(t *testing.T) {
	const seed = 3
	w1, _ := NewWorkload(seed, Options{Users: 100, SeedPerBook: 10})
	w2, _ := NewWorkload(seed, Options{Users: 100, SeedPerBook: 10})
	n := w1.SetupLen() + 5_000
	want := make([]core.Command, n+1)
	for s := 1; s <= n; s++ {
		w1.Fill(core.Seq(s), &want[s])
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	var c core.Command
	for _, s := range rng.Perm(n) {
		c = core.Command{Kind: core.KindTick, User: 99, Price: 1} // garbage Fill must overwrite
		w2.Fill(core.Seq(s+1), &c)
		if c != want[s+1] {
			t.Fatalf("seed %d seq %d: %+v, want %+v", seed, s+1, c, want[s+1])
		}
	}
}

func TestWorkloadFillDoesNotAllocate(t *testing.T) {
	w, _ := NewWorkload(1, Options{})
	var c core.Command
	seq := core.Seq(1)
	if a := testing.AllocsPerRun(100_000, func() { w.Fill(seq, &c); seq++ }); a != 0 {
		t.Fatalf("Fill allocates %.2f per call", a)
	}
}

func TestNewWorkloadRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{Users: -1}, {Users: MaxUsers + 1}, {Markets: 3}, {SeedPerBook: -1},
		{Markets: 1, SeedPerBook: 5}} {
		if _, err := NewWorkload(1, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

func TestAdjustKeyIsUniqueAndCanonical(t *testing.T) {
	for _, s := range []core.Seq{1, 9, 10, 12345, 1<<64 - 1} {
		k := adjustKey(s)
		if got, want := k.String(), "adj-"+uitoa(uint64(s)); got != want {
			t.Fatalf("adjustKey(%d) = %q, want %q", s, got, want)
		}
	}
}

func uitoa(v uint64) string {
	if v < 10 {
		return string(rune('0' + v))
	}
	return uitoa(v/10) + string(rune('0'+v%10))
}

func BenchmarkFill(b *testing.B) {
	w, _ := NewWorkload(1, Options{})
	var c core.Command
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.Fill(core.Seq(i+1), &c)
	}
}
