package gateway

// These tests prove FormatUnits' fixed-scale canonical form and that every
// int64 at every scale survives FormatUnits → ParseUnits (positives exactly,
// non-positives as the documented rejection).

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestFormatUnits(t *testing.T) {
	for _, c := range []struct {
		v     int64
		scale uint8
		want  string
	}{
		{0, 0, "0"},
		{0, 2, "0.00"},
		{5, 0, "5"},
		{150, 2, "1.50"},
		{123, 2, "1.23"},
		{1, 8, "0.00000001"},
		{1, 18, "0.000000000000000001"},
		{-1, 2, "-0.01"},
		{-150, 2, "-1.50"},
		{math.MaxInt64, 0, "9223372036854775807"},
		{math.MaxInt64, 18, "9.223372036854775807"},
		{math.MinInt64, 0, "-9223372036854775808"},
		{math.MinInt64, 18, "-9.223372036854775808"},
	} {
		if got := FormatUnits(c.v, c.scale); got != c.want {
			t.Errorf("FormatUnits(%d, %d) = %q, want %q", c.v, c.scale, got, c.want)
		}
	}
	if got := string(AppendUnits([]byte("x="), 150, 2)); got != "x=1.50" {
		t.Errorf("AppendUnits = %q", got)
	}
}

// randUnits draws values that stress the edges: tiny, near powers of ten,
// near MaxInt64, and uniform.
func randUnits(r *rand.Rand) int64 {
	switch r.IntN(5) {
	case 0:
		return r.Int64N(1000) - 500
	case 1:
		return pow10(r.IntN(19)) + r.Int64N(3) - 1
	case 2:
		return math.MaxInt64 - r.Int64N(1000)
	case 3:
		return math.MinInt64 + r.Int64N(1000)
	default:
		return int64(r.Uint64())
	}
}

func TestRoundTripProperty(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	for range n {
		v, sc := randUnits(r), uint8(r.IntN(MaxScale+1))
		str := FormatUnits(v, sc)
		got, err := ParseUnits(str, sc)
		switch {
		case v > 0 && (err != nil || got != v):
			t.Fatalf("Parse(Format(%d, %d) = %q) = %d, %v", v, sc, str, got, err)
		case v == math.MinInt64 && !errors.Is(err, &APIError{Code: CodeOverflow}):
			// |MinInt64| > MaxInt64: the magnitude check comes before the sign check.
			t.Fatalf("Parse(Format(%d, %d) = %q) = %d, %v; want OVERFLOW", v, sc, str, got, err)
		case v <= 0 && v != math.MinInt64 && !errors.Is(err, &APIError{Code: CodeInvalidAmount}):
			t.Fatalf("Parse(Format(%d, %d) = %q) = %d, %v; want INVALID_AMOUNT", v, sc, str, got, err)
		}
		if want, werr := refParseUnits(str, sc); codeOf(err) != codeOf(werr) || got != want {
			t.Fatalf("%q at %d: got %d, %v; reference %d, %v", str, sc, got, err, want, werr)
		}
	}
}
