package ring

import (
	"errors"
	"testing"
	"time"
)

type waitResult struct {
	hi  int64
	err error
}

// async runs WaitFor(next) on its own goroutine.
func async(st *Stage[testEntry], next int64) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		hi, err := st.WaitFor(next)
		ch <- waitResult{hi, err}
	}()
	return ch
}

// receive returns the result of ch, failing after 10s.
func receive[V any](t *testing.T, what string, ch <-chan V) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// pending fails if ch already has a result.
func pending[V any](t *testing.T, what string, ch <-chan V) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s returned early: %v", what, v)
	default:
	}
}

func TestBlockedProducerResumes(t *testing.T) {
	r := mustNew(t, 4)
	st := r.NewStage()
	if _, _, err := r.Claim(4); err != nil {
		t.Fatal(err)
	}
	r.Publish(1, 4)
	type claim struct{ lo, hi int64 }
	ch := make(chan claim, 1)
	go func() {
		lo, hi, err := r.Claim(2)
		if err != nil {
			t.Errorf("Claim: %v", err)
		}
		ch <- claim{lo, hi}
	}()
	waitUntil(t, "the producer sleeps", func() bool { return r.room.sleepers.Load() == 1 })
	pending(t, "Claim on a full ring", ch)
	if hi, err := st.WaitFor(1); hi != 4 || err != nil {
		t.Fatalf("WaitFor = %d, %v", hi, err)
	}
	st.Commit(1)
	waitUntil(t, "the producer re-checks", func() bool { return r.room.sleepers.Load() == 1 })
	pending(t, "Claim(2) with one free slot", ch)
	st.Commit(2)
	if c := receive(t, "Claim", ch); c.lo != 5 || c.hi != 6 {
		t.Fatalf("Claim = [%d, %d], want [5, 6]", c.lo, c.hi)
	}
}

func TestCloseUnblocksProducers(t *testing.T) {
	r := mustNew(t, 4)
	r.NewStage()
	if _, _, err := r.Claim(4); err != nil {
		t.Fatal(err)
	}
	const blocked = 3
	errc := make(chan error, blocked)
	for range blocked {
		go func() {
			_, _, err := r.Claim(1)
			errc <- err
		}()
	}
	waitUntil(t, "all producers sleep", func() bool { return r.room.sleepers.Load() == blocked })
	r.Close()
	for range blocked {
		if err := receive(t, "a blocked Claim", errc); !errors.Is(err, ErrClosed) {
			t.Fatalf("Claim err = %v, want ErrClosed", err)
		}
	}
	if _, _, err := r.Claim(1); err != ErrClosed || err.Error() != "ring: closed" {
		t.Fatalf("Claim after Close err = %v", err)
	}
}

func TestCloseUnblocksIdleStages(t *testing.T) {
	r := mustNew(t, 8)
	a, b := r.NewStage(), r.NewStage()
	c := r.NewStage(a, b)
	ca, cb, cc := async(a, 1), async(b, 1), async(c, 1)
	waitUntil(t, "all stages sleep", func() bool {
		return r.published.sleepers.Load() == 2 && r.progress.sleepers.Load() == 1
	})
	r.Close()
	for _, ch := range []<-chan waitResult{ca, cb, cc} {
		if res := receive(t, "a blocked WaitFor", ch); res.err != ErrClosed || res.hi != 0 {
			t.Fatalf("WaitFor = %d, %v, want 0, ErrClosed", res.hi, res.err)
		}
	}
}

// TestCloseDrains: entries published before Close reach every stage; the
// downstream stage keeps waiting for a slow upstream stage after Close and
// stops once an upstream stage is drained and it has read all of it.
func TestCloseDrains(t *testing.T) {
	r := mustNew(t, 8)
	a, b := r.NewStage(), r.NewStage()
	c := r.NewStage(a, b)
	lo, hi, _ := r.Claim(5)
	for s := lo; s <= hi; s++ {
		*r.Slot(s) = testEntry{Seq: s}
	}
	r.Publish(lo, hi)
	r.Close()

	if hi, err := a.WaitFor(1); hi != 5 || err != nil {
		t.Fatalf("a.WaitFor(1) = %d, %v, want 5", hi, err)
	}
	a.Commit(5)
	if _, err := a.WaitFor(6); err != ErrClosed {
		t.Fatalf("a.WaitFor(6) err = %v, want ErrClosed", err)
	}
	cc := async(c, 1)
	waitUntil(t, "c sleeps", func() bool { return r.progress.sleepers.Load() == 1 })
	pending(t, "c.WaitFor(1) before b moved", cc)

	if hi, err := b.WaitFor(1); hi != 5 || err != nil {
		t.Fatalf("b.WaitFor(1) = %d, %v", hi, err)
	}
	b.Commit(3)
	if res := receive(t, "c.WaitFor(1)", cc); res.hi != 3 || res.err != nil {
		t.Fatalf("c.WaitFor(1) = %d, %v, want 3", res.hi, res.err)
	}
	c.Commit(3)
	cc = async(c, 4)
	waitUntil(t, "c sleeps", func() bool { return r.progress.sleepers.Load() == 1 })
	b.Commit(5)
	if res := receive(t, "c.WaitFor(4)", cc); res.hi != 5 || res.err != nil {
		t.Fatalf("c.WaitFor(4) = %d, %v, want 5", res.hi, res.err)
	}
	c.Commit(5)
	// a is done at 5, so nothing beyond 5 can reach c even though b is
	// still open: c is drained.
	if hi, err := c.WaitFor(6); hi != 5 || err != ErrClosed {
		t.Fatalf("c.WaitFor(6) = %d, %v, want 5, ErrClosed", hi, err)
	}
	if _, err := b.WaitFor(6); err != ErrClosed {
		t.Fatalf("b.WaitFor(6) err = %v, want ErrClosed", err)
	}
	for _, s := range []*Stage[testEntry]{a, b, c} {
		if got := s.Sequence().Load(); got != 5 {
			t.Fatalf("stage committed %d, want 5", got)
		}
	}
}

// TestCloseStopsAtUnpublishedClaim: a claim left unpublished at Close ends
// the drain even if later claims were published.
func TestCloseStopsAtUnpublishedClaim(t *testing.T) {
	r := mustNew(t, 8)
	a := r.NewStage()
	r.Claim(2)
	r.Publish(1, 2)
	r.Claim(2) // 3..4 never published
	r.Claim(2)
	r.Publish(5, 6)
	r.Close()
	if hi, err := a.WaitFor(1); hi != 2 || err != nil {
		t.Fatalf("WaitFor(1) = %d, %v, want 2", hi, err)
	}
	a.Commit(2)
	if hi, err := a.WaitFor(3); hi != 2 || err != ErrClosed {
		t.Fatalf("WaitFor(3) = %d, %v, want 2, ErrClosed", hi, err)
	}
}

// TestHalt: a halted stage releases its downstream stage (without Close)
// once the downstream stage has read what the halted stage committed, and a
// blocked WaitFor of the halted stage returns.
func TestHalt(t *testing.T) {
	r := mustNew(t, 8)
	a, b := r.NewStage(), r.NewStage()
	c := r.NewStage(a, b)
	lo, hi, _ := r.Claim(3)
	r.Publish(lo, hi)
	a.WaitFor(1)
	a.Commit(2)
	b.WaitFor(1)
	b.Commit(3)
	a.Halt()
	if hi, err := c.WaitFor(1); hi != 2 || err != nil {
		t.Fatalf("c.WaitFor(1) = %d, %v, want 2", hi, err)
	}
	c.Commit(2)
	if _, err := c.WaitFor(3); err != ErrClosed {
		t.Fatalf("c.WaitFor(3) err = %v, want ErrClosed", err)
	}

	bb := async(b, 4)
	waitUntil(t, "b sleeps", func() bool { return r.published.sleepers.Load() == 1 })
	b.Halt()
	if res := receive(t, "b.WaitFor(4)", bb); res.err != ErrClosed {
		t.Fatalf("b.WaitFor(4) err = %v, want ErrClosed", res.err)
	}
	if r.Closed() {
		t.Fatal("Halt closed the ring")
	}
}
