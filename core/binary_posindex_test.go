package core

import (
	"math/rand/v2"
	"testing"
)

// posIndex holds the same pairs as a map, for accounts in the flat part, at
// its edge and far above it (hash part), across resets.
func TestPosIndexMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for round := range 50 {
		var x posIndex
		ref := map[int32]int32{}
		limit := []int32{100, posDenseMax + 10, 1 << 21}[round%3]
		for k := range 20_000 {
			a := r.Int32N(limit)
			if round%5 == 0 && k%2 == 0 {
				a = posDenseMax - 2 + r.Int32N(4) // around the edge
			}
			if _, ok := ref[a]; !ok && r.IntN(2) == 0 {
				i := int32(len(ref))
				ref[a] = i
				x.put(a, i)
			}
			if want, ok := ref[a]; ok && k%7 == 0 { // a repeated put replaces, and counts once
				x.put(a, want)
			}
			got, ok := x.get(a)
			want, wok := ref[a]
			if ok != wok || (ok && got != want) {
				t.Fatalf("round %d: get(%d) = %d,%v; map has %d,%v", round, a, got, ok, want, wok)
			}
			if x.len() != len(ref) {
				t.Fatalf("round %d: len %d, map %d", round, x.len(), len(ref))
			}
		}
		for a, want := range ref {
			if got, ok := x.get(a); !ok || got != want {
				t.Fatalf("round %d: final get(%d) = %d,%v, want %d", round, a, got, ok, want)
			}
		}
		if _, ok := x.get(-1); ok {
			t.Fatal("a negative account found")
		}
		if len(x.dense) > posDenseMax {
			t.Fatalf("flat part grew to %d", len(x.dense))
		}
	}
}
