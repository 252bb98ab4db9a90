package core

// orderIndex maps a resting order's id to its pool index. The processor
// numbers orders densely from 1, and nearly every lookup (a cancel, a
// modify) and every insert concerns a recent order, so the index keeps the
// last (up to) orderWindow ids in a flat table indexed by the id itself — one load,
// no hashing, no probing, and a delete is one store — and only the orders
// that outlive the window (ids at or below top-len(win)) in a hash map.
//
// The window is (top-len(win), top], top being the highest id ever put.
// When top advances past an id still present, that entry moves to the hash
// map (each id crosses once: O(1) amortized). The set of (id, value) pairs
// is the same as a map's; the split is invisible outside: like idMap it is
// never iterated except by fingerprint, whose sum is order-independent.
type orderIndex struct {
	win  []uint32 // win[id&(len(win)-1)] = value+1 for ids in the window; 0 = absent. nil before the first put
	top  uint64   // the highest id put so far
	nWin int      // entries in win
	old  idMap    // ids below the window
}

// The window starts at orderWindowMin ids and doubles, up to orderWindow
// (256 KiB of table), when an entry would leave it while at least
// 1/orderDensity of it is in use: the table stays within a small multiple
// of the resting orders (fingerprint scans it; tests restore thousands of
// processors), and the orders that outlive a sparse window go to the map.
const (
	orderWindowMin = 1 << 8
	orderWindow    = 1 << 16
	orderDensity   = 4
)

// reserve sizes the map of ids below the window for n ids (a restore's
// count): most of a large book's ids are there, and growing it by doubling
// copied it once per power of two.
func (x *orderIndex) reserve(n int) { x.old.reserve(n) }

// len returns the number of ids present.
func (x *orderIndex) len() int { return x.nWin + x.old.len() }

// get returns the value stored for id.
func (x *orderIndex) get(id uint64) (int32, bool) {
	// top-id wraps to a huge number for id > top: one test for both bounds.
	if n := uint64(len(x.win)); x.top-id < n {
		if v := x.win[id&(n-1)]; v != 0 {
			return int32(v - 1), true
		}
		return 0, false
	}
	return x.old.get(id)
}

// put stores v (>= 0) for id, replacing any previous value.
func (x *orderIndex) put(id uint64, v int32) {
	if v < 0 {
		panic("core: orderIndex value must be non-negative")
	}
	if n := uint64(len(x.win)); id == x.top+1 && n != 0 {
		// The common case: the next id, and the slot it takes holds no id
		// about to leave the window (slide would only advance top).
		if s := &x.win[id&(n-1)]; *s == 0 {
			x.top = id
			*s = uint32(v) + 1
			x.nWin++
			return
		}
	}
	if x.win == nil {
		x.win = make([]uint32, orderWindowMin)
	}
	if id > x.top {
		x.slide(id)
	}
	if n := uint64(len(x.win)); x.top-id < n {
		s := &x.win[id&(n-1)]
		if *s == 0 {
			x.nWin++
		}
		*s = uint32(v) + 1
		return
	}
	x.old.put(id, v)
}

// del removes id and reports whether it was present.
func (x *orderIndex) del(id uint64) bool {
	if n := uint64(len(x.win)); x.top-id < n {
		s := &x.win[id&(n-1)]
		if *s == 0 {
			return false
		}
		*s = 0
		x.nWin--
		return true
	}
	return x.old.del(id)
}

// idAt is the id of window slot s: the one id in (top-len(win), top] that
// maps to it.
func (x *orderIndex) idAt(s int) uint64 {
	return x.top - ((x.top - uint64(s)) & uint64(len(x.win)-1))
}

// slide advances top to newTop. An entry about to leave the window doubles
// the window instead while it is below orderWindow and dense enough, else
// moves to the hash map; a jump past the whole window moves every entry there.
func (x *orderIndex) slide(newTop uint64) {
	for x.top < newTop {
		n := uint64(len(x.win))
		if x.nWin == 0 {
			x.top = newTop
			return
		}
		if newTop-x.top >= n { // the whole window leaves
			for s, v := range x.win {
				if v != 0 {
					x.old.put(x.idAt(s), int32(v-1))
				}
			}
			clear(x.win)
			x.nWin = 0
			x.top = newTop
			return
		}
		t := x.top + 1
		// slot t&(n-1) holds id t-n, if present, which would leave the window
		if s := &x.win[t&(n-1)]; *s != 0 {
			if n < orderWindow && uint64(x.nWin)*orderDensity >= n {
				x.grow()
				continue
			}
			x.old.put(t-n, int32(*s-1))
			*s = 0
			x.nWin--
		}
		x.top = t
	}
}

// grow doubles the window. Ids of the hash map that the larger window
// covers move into it (entries evicted by an earlier jump, or put below
// the window).
func (x *orderIndex) grow() {
	n := uint64(2 * len(x.win))
	nw := make([]uint32, n)
	for s, v := range x.win {
		if v != 0 {
			nw[x.idAt(s)&(n-1)] = v
		}
	}
	x.win = nw
	if x.old.len() == 0 {
		return
	}
	var in []idSlot
	for _, s := range x.old.slots {
		if s.v != 0 && x.top-s.key < n {
			in = append(in, s)
		}
	}
	for _, s := range in {
		x.old.del(s.key)
		x.win[s.key&(n-1)] = s.v
		x.nWin++
	}
}

// fingerprint sums indexFingerprint over the entries (invariants.go).
func (x *orderIndex) fingerprint() uint64 {
	sum := x.old.fingerprint()
	for s, v := range x.win {
		if v != 0 {
			sum += indexFingerprint(x.idAt(s), int32(v-1))
		}
	}
	return sum
}
