package ring

import (
	"sync"
	"testing"
)

// TestStageSleepWakeRounds drives the blocking path of every stage of the
// diamond many times: before each publish, all three stages are asleep, so
// every publish (and every upstream commit) has to wake someone. A lost
// wake-up shows up as a timeout.
func TestStageSleepWakeRounds(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 100
	}
	r := mustNew(t, 8)
	a, b := r.NewStage(), r.NewStage()
	c := r.NewStage(a, b)
	var wg sync.WaitGroup
	for _, st := range []*Stage[testEntry]{a, b, c} {
		wg.Go(func() {
			next := int64(1)
			for {
				hi, err := st.WaitFor(next)
				if err != nil {
					return
				}
				for ; next <= hi; next++ {
					if e := r.Slot(next); e.Seq != next {
						t.Errorf("slot of seq %d holds %d", next, e.Seq)
					}
				}
				st.Commit(hi)
			}
		})
	}
	var total int64
	for i := range rounds {
		waitUntil(t, "all stages sleep", func() bool {
			return r.published.sleepers.Load() == 2 && r.progress.sleepers.Load() == 1
		})
		lo, hi, err := r.Claim(1 + i%r.Cap())
		if err != nil {
			t.Fatal(err)
		}
		for s := lo; s <= hi; s++ {
			*r.Slot(s) = testEntry{Seq: s}
		}
		r.Publish(lo, hi)
		total = hi
	}
	r.Close()
	wg.Wait()
	for _, st := range []*Stage[testEntry]{a, b, c} {
		if got := st.Sequence().Load(); got != total {
			t.Errorf("stage committed %d, want %d", got, total)
		}
	}
}

// TestProducerSleepWakeRounds drives the blocking path of Claim many times:
// the consumer frees one slot only once the producer sleeps on a full ring.
func TestProducerSleepWakeRounds(t *testing.T) {
	rounds := int64(300)
	if testing.Short() {
		rounds = 100
	}
	r := mustNew(t, 4)
	st := r.NewStage()
	total := rounds + int64(r.Cap())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for s := int64(1); s <= total; s++ {
			lo, hi, err := r.Claim(1)
			if err != nil || lo != s || hi != s {
				t.Errorf("Claim = %d, %d, %v, want seq %d", lo, hi, err, s)
				return
			}
			*r.Slot(s) = testEntry{Seq: s}
			r.Publish(s, s)
		}
	}()
	for next := int64(1); next <= rounds; next++ {
		waitUntil(t, "the producer sleeps", func() bool { return r.room.sleepers.Load() == 1 })
		hi, err := st.WaitFor(next)
		if err != nil || hi < next || hi > next+int64(r.Cap())-1 {
			t.Fatalf("WaitFor(%d) = %d, %v", next, hi, err)
		}
		if e := r.Slot(next); e.Seq != next {
			t.Fatalf("slot of seq %d holds %d", next, e.Seq)
		}
		st.Commit(next)
	}
	receive(t, "the producer", done)
	if got := r.Claimed(); got != total {
		t.Fatalf("claimed %d, want %d", got, total)
	}
}
