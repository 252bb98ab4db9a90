package ring

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCloseMidStream closes the diamond while several producers are
// publishing. Every stage must still see a gap-free, ordered stream; the
// first stages must deliver at least the prefix whose Publish calls all
// returned before Close was called; the responder must stop exactly at
// min(journaler, processor).
func TestCloseMidStream(t *testing.T) {
	seed := testSeed(t)
	rounds := 20
	if testing.Short() {
		rounds = 6
	}
	const producers, perProducer = 3, 20_000
	for round := range rounds {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		r := mustNew(t, 64)
		a, b := r.NewStage(), r.NewStage()
		c := r.NewStage(a, b)
		total := int64(producers * perProducer)
		early := make([]bool, total+1) // early[seq]: published before Close was called
		var closing atomic.Bool

		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(round*100+p)))
				for n := 0; n < perProducer; {
					k := min(1+rng.IntN(8), perProducer-n)
					lo, hi, err := r.Claim(k)
					if err != nil {
						return
					}
					for s := lo; s <= hi; s++ {
						*r.Slot(s) = testEntry{Seq: s, Payload: uint64(p)<<32 | uint64(n)}
						n++
					}
					publishShuffled(r, rng, lo, hi)
					if !closing.Load() {
						for s := lo; s <= hi; s++ {
							early[s] = true
						}
					}
				}
			})
		}
		for i, st := range []*Stage[testEntry]{a, b, c} {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(round*100+50+i)))
				if msg := consumeChecked(r, st, rng, producers, 0, func(int64) string { return "" }); msg != "" {
					t.Errorf("round %d stage %d: %s", round, i, msg)
				}
			})
		}
		target := rng.Int64N(total)
		waitUntil(t, "producers make progress", func() bool { return r.Claimed() >= target })
		closing.Store(true)
		r.Close()
		wg.Wait()

		prefix := int64(0)
		for prefix < total && early[prefix+1] {
			prefix++
		}
		as, bs, cs := a.Sequence().Load(), b.Sequence().Load(), c.Sequence().Load()
		if as < prefix || bs < prefix || cs != min(as, bs) {
			t.Fatalf("round %d: prefix published before Close %d; journaler %d, processor %d, responder %d",
				round, prefix, as, bs, cs)
		}
	}
}
