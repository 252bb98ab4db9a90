package core

// binary_arith_test.go: the binary fast paths equal the general arithmetic
// (notional at scale 0, feeOf, withFee) on random and edge values.

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestBinaryArithMatchesGeneral(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	edges := []int64{0, 1, 99, 100, 1_000_000, int64(binFastFee) - 1, int64(binFastFee), int64(binFastFee) + 1,
		1 << 31, 1 << 32, 1 << 62, math.MaxInt64 - 1, math.MaxInt64}
	rates := []Rate{0, 1, 999, 1_000, 2_000, MaxFeeRate}
	check := func(p, q int64, rate Rate) {
		n1, ok1 := binNotional(Price(p), Units(q))
		n2, ok2 := notional(Price(p), Units(q), 0)
		if ok1 != ok2 || (ok1 && n1 != n2) {
			t.Fatalf("notional(%d, %d): %d %v, general %d %v", p, q, n1, ok1, n2, ok2)
		}
		if f1, f2 := binFee(Units(p), rate), feeOf(Units(p), rate); f1 != f2 {
			t.Fatalf("fee(%d, %d): %d, general %d", p, rate, f1, f2)
		}
		h1, okh1 := binaryHold(Price(p), Units(q), rate)
		n, ok := notional(Price(p), Units(q), 0)
		h2, okh2 := Units(0), false
		if ok {
			h2, okh2 = withFee(n, rate)
		}
		if okh1 != okh2 || (okh1 && h1 != h2) {
			t.Fatalf("hold(%d, %d, %d): %d %v, general %d %v", p, q, rate, h1, okh1, h2, okh2)
		}
	}
	for _, p := range edges {
		for _, q := range edges {
			for _, rate := range rates {
				check(p, q, rate)
			}
		}
	}
	for i := 0; i < 200_000; i++ {
		p, q := r.Int64N(1<<uint(1+r.IntN(62))), r.Int64N(1<<uint(1+r.IntN(62)))
		check(p, q, rates[r.IntN(len(rates))])
	}
}
