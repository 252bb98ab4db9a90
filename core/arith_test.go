package core

// arith_test.go checks addUnits against exact big-integer addition on edge
// values (0, ±1, the int64 limits and their neighbours) and random pairs.

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestAddUnitsExact(t *testing.T) {
	edges := []int64{0, 1, -1, 2, -2, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1,
		math.MaxInt64 / 2, math.MinInt64 / 2, 1 << 62, -(1 << 62)}
	check := func(a, b int64) {
		exact := new(big.Int).Add(big.NewInt(a), big.NewInt(b))
		fits := exact.IsInt64()
		s, ok := addUnits(Units(a), Units(b))
		if ok != fits || (fits && int64(s) != exact.Int64()) || (!fits && s != 0) {
			t.Fatalf("addUnits(%d, %d) = %d, %v; exact %s", a, b, s, ok, exact)
		}
	}
	for _, a := range edges {
		for _, b := range edges {
			check(a, b)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100_000; i++ {
		a, b := int64(r.Uint64()), int64(r.Uint64())
		if i%2 == 0 {
			b >>= r.IntN(64)
		}
		check(a, b)
	}
}
