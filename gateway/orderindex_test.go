package gateway

import (
	"math/rand/v2"
	"testing"

	"github.com/ubscore/ubscore/core"
)

// orderIndex agrees with a plain map under random puts, gets and deletes of
// ids that share window entries (ids 2^18 apart), arrive out of order and
// go far back.
func TestOrderIndexMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var x orderIndex
	ref := map[core.OrderID]int32{}
	next := core.OrderID(1)
	back := func(k core.OrderID) core.OrderID { // next-k, at least 1
		if k >= next {
			return 1
		}
		return next - k
	}
	pick := func() core.OrderID {
		switch r.IntN(4) {
		case 0: // a recent id
			return back(core.OrderID(r.IntN(50)))
		case 1: // an id sharing a window entry with a recent one
			return back(core.OrderID(r.IntN(3))<<orderIndexBits + core.OrderID(r.IntN(5)))
		case 2: // any id seen so far
			return 1 + core.OrderID(r.Uint64N(uint64(next)))
		default: // a new id
			next += 1 + core.OrderID(r.IntN(3))
			return next
		}
	}
	for op := 0; op < 400_000; op++ {
		id := pick()
		switch r.IntN(3) {
		case 0:
			slot := int32(r.IntN(1 << 20))
			x.put(id, slot)
			ref[id] = slot
		case 1:
			x.del(id)
			delete(ref, id)
		}
		got, ok := x.get(id)
		want, wantOK := ref[id]
		if ok != wantOK || got != want {
			t.Fatalf("op %d: get(%d) = %d,%v; want %d,%v", op, id, got, ok, want, wantOK)
		}
		if next > 3<<orderIndexBits {
			next = 1 // keep the ids dense enough to collide
		}
	}
	for id, want := range ref {
		if got, ok := x.get(id); !ok || got != want {
			t.Fatalf("get(%d) = %d,%v; want %d", id, got, ok, want)
		}
	}
	n := len(x.old)
	for _, e := range x.win {
		if e.id != 0 {
			n++
			if _, dup := x.old[e.id]; dup {
				t.Fatalf("id %d both in the window and in old", e.id)
			}
		}
	}
	if n != len(ref) {
		t.Fatalf("index holds %d ids, want %d", n, len(ref))
	}
	if _, ok := x.get(0); ok {
		t.Fatal("id 0 found")
	}
}

// Ids placed in order and finished within the window never reach the
// overflow map.
func TestOrderIndexInOrderStaysInWindow(t *testing.T) {
	var x orderIndex
	const keep = MaxFinishedOrders
	for id := core.OrderID(1); id <= 3*(1<<orderIndexBits); id++ {
		x.put(id, int32(id%1000))
		if id > keep {
			x.del(id - keep)
		}
		if len(x.old) != 0 {
			t.Fatalf("id %d: %d ids in the overflow map", id, len(x.old))
		}
	}
	if slot, ok := x.get(3 * (1 << orderIndexBits)); !ok || slot != int32(3*(1<<orderIndexBits)%1000) {
		t.Fatalf("newest id: %d, %v", slot, ok)
	}
	if _, ok := x.get(3*(1<<orderIndexBits) - keep); ok {
		t.Fatal("a deleted id is found")
	}
}
