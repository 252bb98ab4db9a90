package ring

import (
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
	"unsafe"
)

// testEntry is the element of the test rings: the seq stamped by the
// producer and a payload of producer id << 32 | per-producer counter.
type testEntry struct {
	Seq     int64
	Payload uint64
}

// testSeed returns the seed of a randomized test: $RING_SEED if set, else
// time based. The seed is logged when the test fails.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("RING_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("bad RING_SEED %q: %v", v, err)
		}
		seed = s
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (rerun with RING_SEED=%d)", seed, seed)
		}
	})
	return seed
}

// waitUntil polls cond every 50µs until it holds, failing after 10s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func mustNew(t testing.TB, capacity int) *Ring[testEntry] {
	t.Helper()
	r, err := New[testEntry](capacity)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func TestNewCapacity(t *testing.T) {
	for _, c := range []int{-8, 0, 3, 6, 100, MaxCapacity * 2} {
		if _, err := New[testEntry](c); !errors.Is(err, ErrCapacity) {
			t.Errorf("New(%d) err = %v, want ErrCapacity", c, err)
		}
	}
	for _, c := range []int{1, 2, 8, 1024} {
		r, err := New[testEntry](c)
		if err != nil || r.Cap() != c {
			t.Errorf("New(%d) = cap %v, %v", c, r, err)
		}
	}
}

func TestSequencePadding(t *testing.T) {
	var s Sequence
	if off := unsafe.Offsetof(s.v); off < 64 {
		t.Errorf("value at offset %d, want >= 64", off)
	}
	if after := unsafe.Sizeof(s) - unsafe.Offsetof(s.v) - 8; after < 56 {
		t.Errorf("%d bytes of padding after the value, want >= 56", after)
	}
	if s.Load() != 0 {
		t.Errorf("zero Sequence = %d", s.Load())
	}
	s.Store(7)
	if !s.CompareAndSwap(7, 9) || s.Load() != 9 {
		t.Errorf("CompareAndSwap: got %d", s.Load())
	}
}

func TestSeqStartsAtOneAndPrefixIsContiguous(t *testing.T) {
	r := mustNew(t, 16)
	st := r.NewStage()
	a, ah, _ := r.Claim(3)
	b, bh, _ := r.Claim(1)
	c, ch, _ := r.Claim(5)
	if a != 1 || ah != 3 || b != 4 || bh != 4 || c != 5 || ch != 9 || r.Claimed() != 9 {
		t.Fatalf("claims [%d,%d] [%d,%d] [%d,%d], claimed %d", a, ah, b, bh, c, ch, r.Claimed())
	}
	r.Publish(b, bh)
	r.Publish(7, 9) // a claim may be published in pieces, in any order
	if got := st.Available(); got != 0 {
		t.Fatalf("available %d before the first range is published, want 0", got)
	}
	r.Publish(5, 6)
	if got := st.Available(); got != 0 {
		t.Fatalf("available %d, want 0", got)
	}
	r.Publish(a, ah)
	if got := st.Available(); got != 9 {
		t.Fatalf("available %d, want 9", got)
	}
	if hi, err := st.WaitFor(1); hi != 9 || err != nil {
		t.Fatalf("WaitFor(1) = %d, %v", hi, err)
	}
}

func TestMisusePanics(t *testing.T) {
	r := mustNew(t, 8)
	mustPanic(t, "claim without stages", func() { r.TryClaim(1) })
	st := r.NewStage()
	mustPanic(t, "Claim(0)", func() { r.Claim(0) })
	mustPanic(t, "TryClaim(cap+1)", func() { r.TryClaim(9) })
	r.Claim(2)
	mustPanic(t, "NewStage after claim", func() { r.NewStage(st) })
	mustPanic(t, "Publish(0, 1)", func() { r.Publish(0, 1) })
	mustPanic(t, "Publish(2, 1)", func() { r.Publish(2, 1) })
	mustPanic(t, "Publish of more than cap", func() { r.Publish(1, 9) })
	mustPanic(t, "Commit beyond readable", func() { st.Commit(1) })
	other := mustNew(t, 8)
	mustPanic(t, "foreign upstream", func() { other.NewStage(st) })
}

func TestTryClaimReportsFull(t *testing.T) {
	r := mustNew(t, 8)
	a := r.NewStage()
	b := r.NewStage()
	c := r.NewStage(a, b) // only c gates the producers
	if lo, hi, ok := r.TryClaim(8); !ok || lo != 1 || hi != 8 {
		t.Fatalf("TryClaim(8) = %d, %d, %v", lo, hi, ok)
	}
	if _, _, ok := r.TryClaim(1); ok {
		t.Fatal("TryClaim(1) on a full ring succeeded")
	}
	r.Publish(1, 8)
	for _, s := range []*Stage[testEntry]{a, b} {
		if hi, err := s.WaitFor(1); hi != 8 || err != nil {
			t.Fatalf("WaitFor = %d, %v", hi, err)
		}
		s.Commit(8)
	}
	if _, _, ok := r.TryClaim(1); ok {
		t.Fatal("TryClaim(1) succeeded although the gating stage has not moved")
	}
	if hi, err := c.WaitFor(1); hi != 8 || err != nil {
		t.Fatalf("c.WaitFor = %d, %v", hi, err)
	}
	c.Commit(3)
	if _, _, ok := r.TryClaim(4); ok {
		t.Fatal("TryClaim(4) succeeded with 3 free slots")
	}
	if lo, hi, ok := r.TryClaim(3); !ok || lo != 9 || hi != 11 {
		t.Fatalf("TryClaim(3) = %d, %d, %v", lo, hi, ok)
	}
	if _, _, ok := r.TryClaim(1); ok {
		t.Fatal("TryClaim(1) on a full ring succeeded")
	}
	r.Close()
	c.Commit(8)
	if _, _, ok := r.TryClaim(1); ok || !r.Closed() {
		t.Fatalf("TryClaim after Close: ok=%v closed=%v", ok, r.Closed())
	}
}

// TestWrapAround pushes many entries through tiny rings: a producer with
// random claim sizes, a first stage and a stage following it, both checking
// order and payload.
func TestWrapAround(t *testing.T) {
	seed := testSeed(t)
	perSlot := int64(25_000) // entries per slot of capacity, at most 100k entries
	if testing.Short() {
		perSlot = 6_000
	}
	for _, capacity := range []int{1, 2, 8} {
		rng := rand.New(rand.NewPCG(seed, uint64(capacity)))
		total := min(perSlot*int64(capacity), 4*perSlot)
		r := mustNew(t, capacity)
		first := r.NewStage()
		second := r.NewStage(first)
		errc := make(chan error, 2)
		for _, st := range []*Stage[testEntry]{first, second} {
			go func() {
				next := int64(1)
				for {
					hi, err := st.WaitFor(next)
					if err != nil {
						if next != total+1 {
							errc <- errors.New("stopped early")
							return
						}
						errc <- nil
						return
					}
					for ; next <= hi; next++ {
						if e := r.Slot(next); e.Seq != next || e.Payload != uint64(next)*3 {
							r.Close()
							st.Halt()
							errc <- errors.New("bad entry")
							return
						}
					}
					st.Commit(hi)
				}
			}()
		}
		for sent := int64(0); sent < total; {
			n := min(int64(1+rng.IntN(capacity)), total-sent)
			lo, hi, err := r.Claim(int(n))
			if err != nil {
				t.Fatalf("cap %d: Claim: %v", capacity, err)
			}
			for s := lo; s <= hi; s++ {
				*r.Slot(s) = testEntry{Seq: s, Payload: uint64(s) * 3}
			}
			r.Publish(lo, hi)
			sent += n
		}
		r.Close()
		for range 2 {
			if err := <-errc; err != nil {
				t.Fatalf("cap %d: %v", capacity, err)
			}
		}
	}
}
