package journal

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

// TestGather pins the group-commit gathering policy: the journaler yields
// while the batch grows, stops at the first yield that brings nothing, never
// yields more than maxYields times or once the batch reaches maxBatch, and
// never shrinks the batch it was given.
func TestGather(t *testing.T) {
	cases := []struct {
		name      string
		hi        int64   // what WaitFor returned (next is always 1)
		arrivals  []int64 // available() after each yield
		maxBatch  int64
		maxYields int
		want      int64
		yields    int
	}{
		{"idle: one yield, nothing new", 1, []int64{1}, 100, 8, 1, 1},
		{"wave: grows, then quiet", 1, []int64{5, 40, 70, 70}, 100, 8, 70, 4},
		{"stops at maxYields", 1, []int64{2, 3, 4, 5, 6}, 100, 3, 4, 3},
		{"stops once maxBatch is reached", 1, []int64{50, 120, 130}, 100, 8, 120, 2},
		{"already full: no yield", 100, nil, 100, 8, 100, 0},
		{"off (maxYields < 0)", 1, nil, 100, -1, 1, 0},
		{"available never goes back", 10, []int64{10}, 100, 8, 10, 1},
	}
	for _, c := range cases {
		yields := 0
		avail := func() int64 {
			if yields > len(c.arrivals) {
				t.Fatalf("%s: available called after yield %d, arrivals has %d", c.name, yields, len(c.arrivals))
			}
			return c.arrivals[yields-1]
		}
		got := gather(1, c.hi, c.maxBatch, c.maxYields, avail, func() { yields++ })
		if got != c.want || yields != c.yields {
			t.Errorf("%s: gather = %d after %d yields, want %d after %d", c.name, got, yields, c.want, c.yields)
		}
	}
}

// TestGroupCommitsStayWithinMaxBatch: with gathering on and many producers
// publishing, no group commit exceeds MaxBatch (gather may see more, the
// journaler cuts), and every command is journaled once, in order.
func TestGroupCommitsStayWithinMaxBatch(t *testing.T) {
	const maxBatch, producers, perProducer = 5, 4, 2000
	var biggest, total atomic.Int64
	cfg := Config{Dir: t.TempDir(), Logger: quietLog(), NoSync: true, RingSize: 256, MaxBatch: maxBatch,
		TruncateLimit: keepAll, OnJournalBatch: func(n int, _ time.Duration) {
			total.Add(int64(n))
			for b := biggest.Load(); int64(n) > b && !biggest.CompareAndSwap(b, int64(n)); b = biggest.Load() {
			}
		}}
	pl, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := pl.DurableSeq()
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			ticks := []core.Command{{Kind: core.KindTick}, {Kind: core.KindTick}, {Kind: core.KindTick}}
			for i := 0; i < perProducer; i += len(ticks) {
				if _, err := pl.SubmitBatch(ticks); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if b := biggest.Load(); b > maxBatch || b < 2 {
		t.Fatalf("biggest group commit %d, want 2..%d", b, maxBatch)
	}
	if got, want := total.Load(), int64(pl.DurableSeq()-base); got != want {
		t.Fatalf("group commits journaled %d commands, durable advanced %d", got, want)
	}
}
