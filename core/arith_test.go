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

// TestNotionalFeeOfMatchMulDiv checks notional's and feeOf's fast paths
// against mulDiv, their definition, on edge values and random ones.
func TestNotionalFeeOfMatchMulDiv(t *testing.T) {
	edges := []int64{0, 1, -1, 2, 999_999, 1_000_000, 1_000_001, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64,
		math.MaxInt64 / 2, 1 << 32, 1<<32 - 1, 1 << 31, 1 << 62, -(1 << 62), 3_037_000_499, 3_037_000_500}
	check := func(a, b int64) {
		for scale := uint8(0); scale <= MaxBaseScale; scale++ {
			want, wok := mulDiv(a, b, int64(pow10[scale]))
			if got, ok := notional(Price(a), Units(b), scale); int64(got) != want || ok != wok {
				t.Fatalf("notional(%d, %d, %d) = %d, %v; mulDiv %d, %v", a, b, scale, got, ok, want, wok)
			}
		}
		want, _ := mulDiv(a, b, int64(RateDenominator))
		if got := feeOf(Units(a), Rate(b)); int64(got) != want {
			t.Fatalf("feeOf(%d, %d) = %d; mulDiv %d", a, b, got, want)
		}
	}
	for _, a := range edges {
		for _, b := range edges {
			check(a, b)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 100_000; i++ {
		a, b := int64(r.Uint64()>>r.IntN(64)), int64(r.Uint64()>>r.IntN(64))
		if i%7 == 0 {
			a = -a
		}
		check(a, b)
	}
}
