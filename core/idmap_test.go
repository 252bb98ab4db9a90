package core

// idmap_test.go proves idMap behaves exactly like a Go map[uint64]int32 on
// random operation streams (several key shapes: dense, sequential, sparse,
// colliding multiples of powers of two, and 0), that every entry stays
// reachable after backward-shift deletion, and that churn does not grow it.

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// checkIdMap verifies m against the reference and its own structure: the
// count, every reference key's value, and that each stored key is reached
// from its home slot without crossing an empty slot.
func checkIdMap(t *testing.T, m *idMap, ref map[uint64]int32) {
	t.Helper()
	if m.len() != len(ref) {
		t.Fatalf("len %d, reference %d", m.len(), len(ref))
	}
	for k, v := range ref { // map order does not matter: every key is checked
		got, ok := m.get(k)
		if !ok || got != v {
			t.Fatalf("get(%d) = %d, %v; want %d", k, got, ok, v)
		}
	}
	if len(m.slots) == 0 {
		return
	}
	mask := uint64(len(m.slots) - 1)
	n := 0
	for i, s := range m.slots {
		if s.v == 0 {
			continue
		}
		n++
		for j := m.home(s.key); j != uint64(i); j = (j + 1) & mask {
			if m.slots[j].v == 0 {
				t.Fatalf("key %d at slot %d unreachable: empty slot %d after its home %d", s.key, i, j, m.home(s.key))
			}
		}
	}
	if n != m.n {
		t.Fatalf("%d occupied slots, n = %d", n, m.n)
	}
	if m.n<<idMapLoadShift > len(m.slots) {
		t.Fatalf("load %d/%d above the bound", m.n, len(m.slots))
	}
}

// keyShapes draw keys of different structure from a small universe, so
// puts, overwrites and deletes of present keys all happen often.
var keyShapes = map[string]func(r *rand.Rand, universe int) uint64{
	"dense":  func(r *rand.Rand, u int) uint64 { return uint64(r.IntN(u)) },
	"sparse": func(r *rand.Rand, u int) uint64 { return r.Uint64() % uint64(u) * 0x1000_0001_0003 },
	"pow2":   func(r *rand.Rand, u int) uint64 { return uint64(r.IntN(u)) << (32 + r.IntN(4)) },
	"high":   func(r *rand.Rand, u int) uint64 { return ^uint64(0) - uint64(r.IntN(u)) },
}

func TestIdMapDifferential(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	for name, shape := range keyShapes { // map order does not matter: independent subtests
		for _, universe := range []int{4, 64, 5_000} {
			r := rand.New(rand.NewPCG(seed, uint64(universe)))
			var m idMap
			ref := map[uint64]int32{}
			steps := 20_000
			if testing.Short() {
				steps = 5_000
			}
			for i := 0; i < steps; i++ {
				k := shape(r, universe)
				switch op := r.IntN(10); {
				case op < 5:
					v := int32(r.IntN(1 << 30))
					m.put(k, v)
					ref[k] = v
				case op < 8:
					_, had := ref[k]
					if got := m.del(k); got != had {
						t.Fatalf("seed %d %s/%d step %d: del(%d) = %v, want %v", seed, name, universe, i, k, got, had)
					}
					delete(ref, k)
				default:
					want, had := ref[k]
					if got, ok := m.get(k); ok != had || got != want {
						t.Fatalf("seed %d %s/%d step %d: get(%d) = %d, %v; want %d, %v", seed, name, universe, i, k, got, ok, want, had)
					}
				}
				if i%997 == 0 {
					checkIdMap(t, &m, ref)
				}
			}
			checkIdMap(t, &m, ref)
			m.reset()
			clear(ref)
			checkIdMap(t, &m, ref)
		}
	}
}

// TestIdMapSequentialChurn models the order index: ids rise forever while
// only a window of them is live. The table must stay sized to the window.
func TestIdMapSequentialChurn(t *testing.T) {
	var m idMap
	ref := map[uint64]int32{}
	const window = 1_000
	for id := uint64(1); id <= 200_000; id++ {
		m.put(id, int32(id%7))
		ref[id] = int32(id % 7)
		if id > window {
			if !m.del(id - window) {
				t.Fatalf("del(%d): not found", id-window)
			}
			delete(ref, id-window)
		}
	}
	checkIdMap(t, &m, ref)
	if len(m.slots) > 4*window {
		t.Fatalf("%d slots for %d live keys: churn grew the table", len(m.slots), window)
	}
}

func TestIdMapZeroKeyAndEmpty(t *testing.T) {
	var m idMap
	if _, ok := m.get(0); ok {
		t.Fatal("empty map has key 0")
	}
	if m.del(0) {
		t.Fatal("del on empty map reported a key")
	}
	m.put(0, 0)
	if v, ok := m.get(0); !ok || v != 0 {
		t.Fatalf("get(0) = %d, %v", v, ok)
	}
	m.put(0, 7)
	if v, _ := m.get(0); v != 7 || m.len() != 1 {
		t.Fatalf("overwrite: get(0) = %d, len %d", v, m.len())
	}
	if !m.del(0) || m.len() != 0 {
		t.Fatal("del(0)")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("put of a negative value did not panic")
		}
	}()
	m.put(1, -1)
}

// FuzzIdMap reads the input as operations (op byte, key) on a small key
// universe and checks idMap against a Go map after every one.
func FuzzIdMap(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 2, 0})
	f.Add([]byte{0, 1, 0, 17, 0, 33, 1, 1, 2, 17, 2, 33})
	f.Add(binary.LittleEndian.AppendUint64(nil, 0x9E3779B97F4A7C15))
	f.Fuzz(func(t *testing.T, ops []byte) {
		var m idMap
		ref := map[uint64]int32{}
		for i := 0; i+1 < len(ops); i += 2 {
			// keys share low bits with each other and with multiples of 16
			k := uint64(ops[i+1]) * 0x10
			if ops[i]&0x80 != 0 {
				k = uint64(ops[i+1])
			}
			switch ops[i] % 3 {
			case 0:
				m.put(k, int32(i))
				ref[k] = int32(i)
			case 1:
				_, had := ref[k]
				if m.del(k) != had {
					t.Fatalf("op %d: del(%d) disagrees", i/2, k)
				}
				delete(ref, k)
			case 2:
				want, had := ref[k]
				if got, ok := m.get(k); ok != had || got != want {
					t.Fatalf("op %d: get(%d) = %d, %v; want %d, %v", i/2, k, got, ok, want, had)
				}
			}
		}
		checkIdMap(t, &m, ref)
	})
}

// TestUserIndexDifferential checks userIndex against a Go map with ids on
// both sides of userDenseLimit, 0 (FeeUser) and the edges included.
func TestUserIndexDifferential(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	edges := []UserID{0, 1, 63, 64, 65, userDenseLimit - 1, userDenseLimit, userDenseLimit + 1, 1<<64 - 1}
	draw := func() UserID {
		switch r.IntN(4) {
		case 0:
			return edges[r.IntN(len(edges))]
		case 1:
			return UserID(r.IntN(300))
		case 2:
			return UserID(r.IntN(userDenseLimit + 50))
		}
		return UserID(r.Uint64()%2000) << 40
	}
	var x userIndex
	ref := map[UserID]int32{}
	for i := 0; i < 20_000; i++ {
		u := draw()
		if r.IntN(3) == 0 {
			v := int32(r.IntN(MaxUsers))
			x.put(u, v)
			ref[u] = v
		} else {
			want, had := ref[u]
			if got, ok := x.get(u); ok != had || got != want {
				t.Fatalf("seed %d step %d: get(%d) = %d, %v; want %d, %v", seed, i, u, got, ok, want, had)
			}
		}
		if x.len() != len(ref) {
			t.Fatalf("seed %d step %d: len %d, want %d", seed, i, x.len(), len(ref))
		}
	}
	for u, v := range ref { // map order does not matter: every key is checked
		if got, ok := x.get(u); !ok || got != v {
			t.Fatalf("seed %d: get(%d) = %d, %v; want %d", seed, u, got, ok, v)
		}
	}
	if len(x.dense) > userDenseLimit {
		t.Fatalf("dense table of %d entries, limit %d", len(x.dense), userDenseLimit)
	}
	x.reset()
	for _, u := range edges {
		if _, ok := x.get(u); ok || x.len() != 0 {
			t.Fatalf("after reset: get(%d) found, len %d", u, x.len())
		}
	}
}

// TestIdMapReserve: a reserved table takes n keys without growing, keeps
// the load bound, and keeps what it held before.
func TestIdMapReserve(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 1000, 4096} {
		var m idMap
		m.put(1<<40, 3) // held before the reserve
		m.reserve(n)
		size := len(m.slots)
		if (n+1)<<idMapLoadShift > size && n > 0 {
			t.Fatalf("reserve(%d): %d slots cannot hold %d keys under the load bound", n, size, n)
		}
		for i := 0; i < n; i++ {
			m.put(uint64(i)*0x9E37+5, int32(i))
		}
		if len(m.slots) != size {
			t.Errorf("reserve(%d): the table grew from %d to %d slots while taking the reserved keys", n, size, len(m.slots))
		}
		if v, ok := m.get(1 << 40); !ok || v != 3 {
			t.Errorf("reserve(%d) lost the key held before it", n)
		}
		for i := 0; i < n; i++ {
			if v, ok := m.get(uint64(i)*0x9E37 + 5); !ok || v != int32(i) {
				t.Fatalf("reserve(%d): key %d lost", n, i)
			}
		}
	}
}
