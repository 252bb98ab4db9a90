package core

// posIndex maps an account index to the index of its position in one
// binary market. Accounts below posDenseMax (the first 64k: account
// indexes are dense, in creation order) are looked up in a flat table
// indexed by the account — one load, no hashing, a table of at most 256 KiB
// that grows by doubling only as far as the highest account with a position
// here; accounts above it go to a hash map. The same pairs as a map (the
// differential test in binary_posindex_test.go); never iterated.
type posIndex struct {
	dense []int32 // dense[a] = position index + 1 for account a (0: none); len a power of two <= posDenseMax
	far   idMap   // accounts >= posDenseMax
	n     int     // pairs stored
}

const posDenseMax = 1 << 16

// get returns account a's position index.
func (x *posIndex) get(a int32) (int32, bool) {
	if uint32(a) < uint32(len(x.dense)) {
		v := x.dense[a]
		return v - 1, v != 0
	}
	if a < posDenseMax {
		return 0, false
	}
	return x.far.get(uint64(a))
}

// put stores account a's position index i, replacing any previous one.
func (x *posIndex) put(a int32, i int32) {
	if a >= posDenseMax {
		n := x.far.len()
		x.far.put(uint64(a), i)
		x.n += x.far.len() - n
		return
	}
	if int(a) >= len(x.dense) {
		n := max(64, len(x.dense))
		for n <= int(a) {
			n *= 2
		}
		d := make([]int32, n)
		copy(d, x.dense)
		x.dense = d
	}
	if x.dense[a] == 0 {
		x.n++
	}
	x.dense[a] = i + 1
}

// len returns the number of pairs stored.
func (x *posIndex) len() int { return x.n }
