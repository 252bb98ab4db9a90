package chaintx

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The allocGate binds late: workers that take a ticket while the committer
// is busy all go into its next transaction, each getting its own results.
func TestAllocGateMergesWaitingWorkersIntoOneRun(t *testing.T) {
	release := make(chan struct{})
	runs := make(chan []AllocGroup, 10)
	g := newAllocGate(1, func(gs []AllocGroup) ([]AllocResult, error) {
		runs <- gs
		if len(runs) == 1 && gs[0].MaxCreated == -1 {
			<-release // the first run holds the only committer
		}
		out := make([]AllocResult, len(gs))
		for i, x := range gs {
			out[i] = AllocResult{Next: uint64(x.MaxCreated)} // echo, to check each worker gets its own
		}
		return out, nil
	})
	defer g.stop()
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		tk, err := g.wait(ctx)
		if err == nil {
			_, err = tk.run([]AllocGroup{{MaxCreated: -1}})
		}
		first <- err
	}()
	<-waitChan(t, func() bool { return len(runs) == 1 })
	const n = 5
	type got struct {
		want int
		res  []AllocResult
		err  error
	}
	results := make(chan got, n)
	for i := range n {
		go func() {
			tk, err := g.wait(ctx)
			if err != nil {
				results <- got{want: i, err: err}
				return
			}
			// Built after the claim: two groups from this worker.
			res, err := tk.run([]AllocGroup{{MaxCreated: 10 * i}, {MaxCreated: 10*i + 1}})
			results <- got{want: i, res: res, err: err}
		}()
	}
	<-waitChan(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.waiting) == n })
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range n {
		r := <-results
		if r.err != nil || len(r.res) != 2 || r.res[0].Next != uint64(10*r.want) || r.res[1].Next != uint64(10*r.want+1) {
			t.Fatalf("worker %d: %+v %v", r.want, r.res, r.err)
		}
	}
	<-runs // the first
	if second := <-runs; len(second) != 2*n {
		t.Fatalf("second transaction has %d groups, want every waiting worker's (%d)", len(second), 2*n)
	}
	if len(runs) != 0 {
		t.Fatalf("%d more transactions, want the waiting workers merged into one", len(runs))
	}
}

// A worker whose ctx ends before a claim leaves no ticket behind (the
// committer never waits for it); after stop, wait refuses.
func TestAllocGateAbandonedAndStopped(t *testing.T) {
	block := make(chan struct{})
	g := newAllocGate(1, func(gs []AllocGroup) ([]AllocResult, error) {
		<-block
		return make([]AllocResult, len(gs)), nil
	})
	busy, err := g.wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	go busy.run([]AllocGroup{{}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := g.wait(ctx); done <- err }()
	<-waitChan(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.waiting) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned wait: %v", err)
	}
	g.mu.Lock()
	left := len(g.waiting)
	g.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d tickets left after the worker gave up", left)
	}
	close(block)
	g.stop()
	if _, err := g.wait(context.Background()); !errors.Is(err, errCombinerStopped) {
		t.Fatalf("wait after stop: %v", err)
	}
}

// The combiner merges the calls queued while its runner is busy.
func TestCombinerMergesQueuedCalls(t *testing.T) {
	release := make(chan struct{})
	sizes := make(chan int, 10)
	c := newCombiner(1, 100, func(int) int { return 1 }, func(gs []int) ([]int, error) {
		sizes <- len(gs)
		if gs[0] < 0 {
			<-release
		}
		out := make([]int, len(gs))
		for i, x := range gs {
			out[i] = x * 2
		}
		return out, nil
	})
	defer c.stop()
	ctx := context.Background()
	first := make(chan struct{})
	go func() { c.do(ctx, []int{-1}); close(first) }()
	<-waitChan(t, func() bool { return len(sizes) == 1 }) // the runner holds the first call
	const n = 6
	res := make(chan [2]int, n)
	for i := 1; i <= n; i++ {
		go func() {
			r, err := c.do(ctx, []int{i})
			if err != nil || len(r) != 1 {
				t.Errorf("call %d: %v %v", i, r, err)
				return
			}
			res <- [2]int{i, r[0]}
		}()
	}
	<-waitChan(t, func() bool { return len(c.q) == n })
	close(release)
	<-first
	for range n {
		r := <-res
		if r[1] != 2*r[0] {
			t.Fatalf("call %d got %d", r[0], r[1])
		}
	}
	if a, b := <-sizes, <-sizes; a != 1 || b != n || len(sizes) != 0 {
		t.Fatalf("transactions of %d and %d calls (+%d more), want 1 and %d", a, b, len(sizes), n)
	}
}

// waitChan closes its channel once cond holds (10 s at most).
func waitChan(t *testing.T, cond func() bool) chan struct{} {
	t.Helper()
	ch := make(chan struct{})
	end := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
	close(ch)
	return ch
}
