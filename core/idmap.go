package core

// idMap maps uint64 keys (user ids, order ids) to non-negative int32 values
// (indexes into the processor's slices). It replaces Go maps on the apply
// path: one cache line holds four slots, a lookup hashes with one multiply
// and usually touches one line, and nothing allocates except growth.
//
// Open addressing with linear probing; deletion shifts the following run
// back (no tombstones), so the table never degrades under churn. Every key
// is allowed, 0 included (FeeUser). It is never iterated, so its layout
// cannot reach state, events or snapshots: only get/put/del results can.
type idMap struct {
	slots []idSlot // len is a power of two (0 before the first put)
	shift uint     // 64 - log2(len(slots))
	n     int      // keys present; < len(slots)/2 (see idMapLoadShift)
}

// idSlot is one entry. v is value+1, so the zero slot is empty.
type idSlot struct {
	key uint64
	v   uint32
}

const (
	idMapMinSlots = 16
	// idMapLoadShift bounds the load factor at 1/2^idMapLoadShift: the table
	// doubles before it is half full, which keeps linear-probing runs short.
	idMapLoadShift = 1
)

// home is key's first probe slot, by Fibonacci hashing: the top bits of
// key*2^64/phi. Consecutive keys (order ids, dense user ids) land far apart.
func (m *idMap) home(key uint64) uint64 {
	return (key * 0x9E3779B97F4A7C15) >> m.shift
}

// len returns the number of keys present.
func (m *idMap) len() int { return m.n }

// get returns the value stored for key.
func (m *idMap) get(key uint64) (int32, bool) {
	if m.n == 0 {
		return 0, false
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.v == 0 {
			return 0, false
		}
		if s.key == key {
			return int32(s.v - 1), true
		}
	}
}

// put stores v (>= 0) for key, replacing any previous value.
func (m *idMap) put(key uint64, v int32) {
	if v < 0 {
		panic("core: idMap value must be non-negative")
	}
	if (m.n+1)<<idMapLoadShift > len(m.slots) {
		m.grow()
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.v == 0 {
			s.key, s.v = key, uint32(v)+1
			m.n++
			return
		}
		if s.key == key {
			s.v = uint32(v) + 1
			return
		}
	}
}

// del removes key and reports whether it was present.
func (m *idMap) del(key uint64) bool {
	if m.n == 0 {
		return false
	}
	mask := uint64(len(m.slots) - 1)
	i := m.home(key)
	for {
		s := &m.slots[i]
		if s.v == 0 {
			return false
		}
		if s.key == key {
			break
		}
		i = (i + 1) & mask
	}
	// Backward-shift deletion: move later entries of the run into the hole
	// unless that would put them before their home slot.
	hole := i
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		s := &m.slots[j]
		if s.v == 0 {
			break
		}
		h := m.home(s.key)
		// s may fill the hole iff its home is not in (hole, j] cyclically.
		if (j-h)&mask >= (j-hole)&mask {
			m.slots[hole] = *s
			hole = j
		}
	}
	m.slots[hole] = idSlot{}
	m.n--
	return true
}

// grow doubles the table (or creates it) and reinserts every entry.
func (m *idMap) grow() { m.resize(max(idMapMinSlots, 2*len(m.slots))) }

// reserve sizes the table for n keys in all, so that putting them grows it
// at most once here instead of once per doubling (a restore knows its
// count up front).
func (m *idMap) reserve(n int) {
	size := max(idMapMinSlots, len(m.slots))
	for n<<idMapLoadShift >= size {
		size *= 2
	}
	if size > len(m.slots) {
		m.resize(size)
	}
}

// resize rebuilds the table with size slots (a power of two holding every
// key under the load bound) and reinserts every entry.
func (m *idMap) resize(size int) {
	old := m.slots
	m.slots = make([]idSlot, size)
	m.shift = 64
	for s := size; s > 1; s >>= 1 {
		m.shift--
	}
	m.n = 0
	mask := uint64(size - 1)
	for _, s := range old {
		if s.v == 0 {
			continue
		}
		i := m.home(s.key)
		for m.slots[i].v != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = s
		m.n++
	}
}

// reset empties the map, keeping its table.
func (m *idMap) reset() {
	clear(m.slots)
	m.n = 0
}
