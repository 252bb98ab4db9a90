package core

// orderindex_test.go proves orderIndex behaves exactly like a Go
// map[uint64]int32 on random streams shaped like the processor's (ids
// mostly rising, gaps, deletes of recent and old ids, entries outliving the
// window, jumps of more than a window, id 0 and the top of the range), and
// that its fingerprint is the reference's.

import (
	"math/rand/v2"
	"testing"
)

func checkOrderIndex(t *testing.T, x *orderIndex, ref map[uint64]int32) {
	t.Helper()
	if x.len() != len(ref) {
		t.Fatalf("len %d, reference %d", x.len(), len(ref))
	}
	var fp uint64
	for k, v := range ref { // map order does not matter: every key is checked, the sum commutes
		got, ok := x.get(k)
		if !ok || got != v {
			t.Fatalf("get(%d) = %d, %v; want %d", k, got, ok, v)
		}
		fp += indexFingerprint(k, v)
	}
	if got := x.fingerprint(); got != fp {
		t.Fatalf("fingerprint %x, reference %x", got, fp)
	}
	for k := range ref {
		if x.top-k < uint64(len(x.win)) {
			if _, in := x.old.get(k); in {
				t.Fatalf("id %d in the window and in the hash map", k)
			}
		} else if _, in := x.old.get(k); !in {
			t.Fatalf("id %d below the window not in the hash map", k)
		}
	}
}

func TestOrderIndexDifferential(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	steps := 200_000
	if testing.Short() {
		steps = 50_000
	}
	for round := uint64(0); round < 4; round++ {
		r := rand.New(rand.NewPCG(seed, round))
		var x orderIndex
		ref := map[uint64]int32{}
		var live []uint64       // ids present (order irrelevant)
		pos := map[uint64]int{} // index of each in live
		next := uint64(1)
		if round == 3 {
			next = ^uint64(0) - uint64(steps) - 10 // near the top of the range
		}
		pick := func() uint64 {
			if len(live) == 0 || r.IntN(10) == 0 {
				return next - uint64(r.IntN(3*orderWindow)) // mostly absent, some below the window
			}
			return live[r.IntN(len(live))]
		}
		for i := 0; i < steps; i++ {
			switch op := r.IntN(100); {
			case op < 45: // a new order rests
				if r.IntN(1000) == 0 {
					next += uint64(r.IntN(3 * orderWindow)) // a long run of ids that never rest
				}
				id := next
				next += 1 + uint64(r.IntN(3))
				v := int32(r.IntN(1 << 30))
				x.put(id, v)
				ref[id] = v
				pos[id] = len(live)
				live = append(live, id)
			case op < 50: // an old or present id put again (restore order, re-insert)
				id := pick()
				if id >= next {
					continue
				}
				v := int32(r.IntN(1 << 30))
				if _, ok := ref[id]; !ok {
					pos[id] = len(live)
					live = append(live, id)
				}
				x.put(id, v)
				ref[id] = v
			case op < 90: // a delete, most of the recent half
				var id uint64
				if len(live) > 0 && r.IntN(4) != 0 {
					j := len(live) - 1 - r.IntN(min(len(live), 64))
					id = live[j]
				} else {
					id = pick()
				}
				_, want := ref[id]
				if got := x.del(id); got != want {
					t.Fatalf("del(%d) = %v, want %v", id, got, want)
				}
				delete(ref, id)
				if j, ok := pos[id]; ok {
					last := live[len(live)-1]
					live[j], pos[last] = last, j
					live = live[:len(live)-1]
					delete(pos, id)
				}
			default:
				id := pick()
				v, ok := x.get(id)
				if w, wok := ref[id]; ok != wok || v != w {
					t.Fatalf("get(%d) = %d, %v; want %d, %v", id, v, ok, w, wok)
				}
			}
			if i%20_000 == 0 {
				checkOrderIndex(t, &x, ref)
			}
		}
		checkOrderIndex(t, &x, ref)
		if x.old.len() == 0 {
			t.Errorf("round %d: no entry outlived the window: the hash map went untested", round)
		}
	}
}

func TestOrderIndexZeroAndJump(t *testing.T) {
	var x orderIndex
	if _, ok := x.get(0); ok || x.del(0) || x.len() != 0 {
		t.Fatal("empty index reports an entry")
	}
	x.put(0, 7)
	x.put(5, 8)
	x.put(orderWindow+3, 9) // a jump past the window: 0 and 5 move to the hash map
	x.put(1<<40, 10)        // and orderWindow+3
	ref := map[uint64]int32{0: 7, 5: 8, orderWindow + 3: 9, 1 << 40: 10}
	checkOrderIndex(t, &x, ref)
	if x.nWin != 1 || x.old.len() != 3 {
		t.Fatalf("window %d, hash map %d; want 1 and 3", x.nWin, x.old.len())
	}
	x.put(^uint64(0), 11) // the top of the range: slide ends
	ref[^uint64(0)] = 11
	checkOrderIndex(t, &x, ref)
}

// TestOrderIndexGrows: the window starts small, doubles rather than evict
// while below orderWindow (taking back the hash map's ids it now covers),
// and at orderWindow evicts the oldest entry to the hash map.
func TestOrderIndexGrows(t *testing.T) {
	var x orderIndex
	ref := map[uint64]int32{}
	x.put(3, 3) // below the window after the jump: hash map
	x.put(orderWindowMin+10, 1)
	ref[3], ref[orderWindowMin+10] = 3, 1
	if len(x.win) != orderWindowMin || x.old.len() != 1 {
		t.Fatalf("window %d, hash map %d; want %d and 1", len(x.win), x.old.len(), orderWindowMin)
	}
	checkOrderIndex(t, &x, ref)
	for id := uint64(orderWindowMin + 11); id <= 3*orderWindow; id++ {
		x.put(id, int32(id%1000))
		ref[id] = int32(id % 1000)
		if id == 3*orderWindowMin+100 { // past two doublings (at ids 266+256 and 266+512): the second covers id 3
			checkOrderIndex(t, &x, ref)
			if len(x.win) != 4*orderWindowMin || x.old.len() != 0 {
				t.Fatalf("at id %d: window %d, hash map %d; want %d and 0", id, len(x.win), x.old.len(), 4*orderWindowMin)
			}
		}
	}
	if len(x.win) != orderWindow || x.nWin != orderWindow || x.old.len() != len(ref)-orderWindow {
		t.Fatalf("window %d holding %d, hash map %d", len(x.win), x.nWin, x.old.len())
	}
	checkOrderIndex(t, &x, ref)
}
