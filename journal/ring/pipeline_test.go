package ring

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDiamondMultiProducer runs the exchange topology
//
//	producers -> {journaler, processor} -> responder
//
// with several producers claiming random sizes (some via TryClaim) and
// publishing each claim in shuffled pieces. Every stage checks that it sees
// every seq once, in order, with the payload its producer wrote and with each
// producer's counter increasing by one. The journaler and the processor mark
// a side array per seq; the responder checks both marks (and both upstream
// Sequences) before it looks at a seq. The ring is closed when the producers
// are done, so the run also checks that all three stages drain completely.
func TestDiamondMultiProducer(t *testing.T) {
	seed := testSeed(t)
	perProducer := 40_000
	if testing.Short() {
		perProducer = 5_000
	}
	for _, capacity := range []int{4, 64, 1024} {
		t.Run(fmt.Sprintf("cap=%d", capacity), func(t *testing.T) {
			runDiamond(t, seed+uint64(capacity), capacity, 4, perProducer, 16)
		})
	}
}

func runDiamond(t *testing.T, seed uint64, capacity, producers, perProducer, maxClaim int) {
	r := mustNew(t, capacity)
	journaler := r.NewStage()
	processor := r.NewStage()
	responder := r.NewStage(journaler, processor)
	total := int64(producers * perProducer)
	journaled := make([]bool, total+1) // written by the journaler, read by the responder
	processed := make([]bool, total+1) // written by the processor, read by the responder

	var full atomic.Int64
	var prodWG sync.WaitGroup
	for p := range producers {
		prodWG.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(p)))
			for c := 0; c < perProducer; {
				n := min(1+rng.IntN(maxClaim), perProducer-c, capacity)
				var lo, hi int64
				var err error
				if rng.IntN(2) == 0 {
					var ok bool
					if lo, hi, ok = r.TryClaim(n); !ok {
						full.Add(1)
						lo, hi, err = r.Claim(n)
					}
				} else {
					lo, hi, err = r.Claim(n)
				}
				if err != nil {
					t.Errorf("producer %d: Claim: %v", p, err)
					return
				}
				for s := lo; s <= hi; s++ {
					*r.Slot(s) = testEntry{Seq: s, Payload: uint64(p)<<32 | uint64(c)}
					c++
				}
				publishShuffled(r, rng, lo, hi)
				if rng.IntN(8) == 0 {
					runtime.Gosched()
				}
			}
		})
	}

	stages := []struct {
		name  string
		st    *Stage[testEntry]
		visit func(seq int64) string
	}{
		{"journaler", journaler, func(seq int64) string { journaled[seq] = true; return "" }},
		{"processor", processor, func(seq int64) string { processed[seq] = true; return "" }},
		{"responder", responder, func(seq int64) string {
			if !journaled[seq] || !processed[seq] {
				return "not yet journaled and processed"
			}
			if journaler.Sequence().Load() < seq || processor.Sequence().Load() < seq {
				return "an upstream Sequence is behind"
			}
			return ""
		}},
	}
	var stageWG sync.WaitGroup
	for i, s := range stages {
		stageWG.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(1000+i)))
			if msg := consumeChecked(r, s.st, rng, producers, perProducer, s.visit); msg != "" {
				t.Errorf("%s: %s", s.name, msg)
				r.Close()
				s.st.Halt()
			}
		})
	}

	go func() { prodWG.Wait(); r.Close() }()
	allDone := make(chan struct{})
	go func() { stageWG.Wait(); prodWG.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-time.After(60 * time.Second):
		r.Close()
		select {
		case <-allDone:
		case <-time.After(10 * time.Second):
		}
		t.Fatalf("pipeline did not finish (claimed %d of %d)", r.Claimed(), total)
	}
	for _, s := range stages {
		if got := s.st.Sequence().Load(); got != total {
			t.Errorf("%s committed %d, want %d", s.name, got, total)
		}
	}
	t.Logf("cap %d: %d entries, TryClaim reported full %d times", capacity, total, full.Load())
}

// publishShuffled publishes [lo, hi] in up to three pieces in random order.
func publishShuffled(r *Ring[testEntry], rng *rand.Rand, lo, hi int64) {
	cuts := []int64{lo, hi + 1}
	for range rng.IntN(3) {
		cuts = append(cuts, lo+rng.Int64N(hi-lo+1))
	}
	// sort the few cut points, then drop duplicates
	for i := 1; i < len(cuts); i++ {
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	var pieces [][2]int64
	for i := 0; i+1 < len(cuts); i++ {
		if cuts[i] < cuts[i+1] {
			pieces = append(pieces, [2]int64{cuts[i], cuts[i+1] - 1})
		}
	}
	rng.Shuffle(len(pieces), func(i, j int) { pieces[i], pieces[j] = pieces[j], pieces[i] })
	for _, p := range pieces {
		r.Publish(p[0], p[1])
	}
}

// consumeChecked runs the consumer loop of st until ErrClosed, checking each
// entry; it commits random prefixes of the available batches. It returns a
// description of the first problem, or "" if the stage saw entries in
// order and (when perProducer > 0) every entry of every producer.
func consumeChecked(r *Ring[testEntry], st *Stage[testEntry], rng *rand.Rand, producers, perProducer int, visit func(seq int64) string) string {
	last := make([]int64, producers) // last counter seen per producer
	for i := range last {
		last[i] = -1
	}
	next := int64(1)
	for {
		hi, err := st.WaitFor(next)
		if err != nil {
			break
		}
		if hi < next {
			return fmt.Sprintf("WaitFor(%d) = %d", next, hi)
		}
		end := hi
		if rng.IntN(4) == 0 {
			end = next + rng.Int64N(hi-next+1)
		}
		for ; next <= end; next++ {
			e := r.Slot(next)
			p, c := e.Payload>>32, int64(uint32(e.Payload))
			if e.Seq != next {
				return fmt.Sprintf("slot of seq %d holds seq %d", next, e.Seq)
			}
			if p >= uint64(producers) || c != last[p]+1 {
				return fmt.Sprintf("seq %d: producer %d counter %d after %d", next, p, c, last[min(p, uint64(producers-1))])
			}
			last[p] = c
			if msg := visit(next); msg != "" {
				return fmt.Sprintf("seq %d: %s", next, msg)
			}
		}
		st.Commit(end)
		if rng.IntN(16) == 0 {
			runtime.Gosched()
		}
	}
	for p, c := range last {
		if perProducer > 0 && c != int64(perProducer-1) {
			return fmt.Sprintf("drained with producer %d at counter %d, want %d", p, c, perProducer-1)
		}
	}
	return ""
}
