package core

// book_find_test.go checks bookSide.find (a gallop down from the best level, then a
// branch-free lower bound) against a linear scan on random sorted sides of
// every size from 0 to 70, for prices below, between, at and beyond levels.

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// findLinear is the reference: the first level at or beyond price in the
// side's worst..best order.
func findLinear(s *bookSide, price Price) (int, bool) {
	for i := range s.levels {
		if (s.bid && s.levels[i].price >= price) || (!s.bid && s.levels[i].price <= price) {
			return i, s.levels[i].price == price
		}
	}
	return len(s.levels), false
}

func TestBookSideFindMatchesLinear(t *testing.T) {
	seed := uint64(rand.Int64())
	r := rand.New(rand.NewPCG(seed, 7))
	for n := 0; n <= 70; n++ {
		for _, bid := range []bool{true, false} {
			for trial := 0; trial < 20; trial++ {
				// distinct prices on a grid of 10 so that gaps exist
				set := map[Price]bool{}
				for len(set) < n {
					set[Price(10*(1+r.IntN(4*n+4)))] = true
				}
				var prices []Price
				for p := range set { // map order does not matter: sorted below
					prices = append(prices, p)
				}
				slices.Sort(prices)
				if !bid {
					slices.Reverse(prices)
				}
				s := &bookSide{bid: bid}
				for _, p := range prices {
					s.levels = append(s.levels, level{price: p})
				}
				for probe := Price(0); probe <= Price(10*(4*n+6)); probe += 5 {
					gi, gok := s.find(probe)
					wi, wok := findLinear(s, probe)
					if gi != wi || gok != wok {
						t.Fatalf("seed %d: bid=%v levels %v: find(%d) = %d, %v; want %d, %v", seed, bid, prices, probe, gi, gok, wi, wok)
					}
				}
			}
		}
	}
}

// TestBookSideAtOnlyAcceptsTheAnswer: for every index and probe price,
// bookSide.at accepts exactly the index find returns (with its found flag).
func TestBookSideAtOnlyAcceptsTheAnswer(t *testing.T) {
	for n := 0; n <= 12; n++ {
		for _, bid := range []bool{true, false} {
			s := &bookSide{bid: bid}
			for k := 1; k <= n; k++ {
				p := Price(10 * k)
				if !bid {
					p = Price(10 * (n + 1 - k))
				}
				s.levels = append(s.levels, level{price: p})
			}
			for probe := Price(0); probe <= Price(10*n+15); probe += 5 {
				wi, wok := findLinear(s, probe)
				for i := -2; i <= n+2; i++ {
					gi, gok, valid := s.at(i, probe)
					if valid != (i == wi) || (valid && (gi != wi || gok != wok)) {
						t.Fatalf("bid=%v n=%d at(%d, %d) = %d, %v, %v; find answers %d, %v", bid, n, i, probe, gi, gok, valid, wi, wok)
					}
				}
			}
		}
	}
}
