package timetext

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func reference(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// TestAppendUTCMatchesTime: the edges (0, ±1 ns, whole seconds, the int64
// extremes, a leap day) and a seeded random walk that stays within seconds
// and jumps between them (the cache's two paths) all give time's bytes.
func TestAppendUTCMatchesTime(t *testing.T) {
	edges := []int64{0, 1, -1, 1e9, -1e9, 1e9 - 1, -1e9 + 1, 999_999_999_999, math.MaxInt64, math.MinInt64,
		math.MinInt64 + 1, 1_709_164_800_123_456_789 /* 2024-02-29 */, 1_700_000_000_000_000_000, 1_700_000_000_100_000_000}
	for _, ns := range edges {
		if got, want := string(AppendUTC(nil, ns)), reference(ns); got != want {
			t.Fatalf("%d: %q, want %q", ns, got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	ns := int64(1_795_000_000_000_000_000)
	for i := 0; i < 200_000; i++ {
		switch r.IntN(4) {
		case 0:
			ns = r.Int64() - r.Int64()/2
		case 1:
			ns += r.Int64N(2e9) - 1e9
		default:
			ns += r.Int64N(1000)
		}
		if got, want := string(AppendUTC([]byte("x"), ns)), "x"+reference(ns); got != want {
			t.Fatalf("%d (seed 1,2, step %d): %q, want %q", ns, i, got, want)
		}
	}
}

func FuzzAppendUTC(f *testing.F) {
	for _, ns := range []int64{0, 1, -1, 1e9, -1e9, math.MaxInt64, math.MinInt64, 1_700_000_000_000_000_001} {
		f.Add(ns, ns+1)
	}
	f.Fuzz(func(t *testing.T, a, b int64) {
		for _, ns := range []int64{a, b} { // two in a row: the cache filled by one, read by the other
			if got, want := string(AppendUTC(nil, ns)), reference(ns); got != want {
				t.Fatalf("%d: %q, want %q", ns, got, want)
			}
		}
	})
}

func BenchmarkAppendUTC(b *testing.B) {
	buf := make([]byte, 0, 64)
	ns := int64(1_795_000_000_000_000_000)
	b.Run("timetext", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			buf = AppendUTC(buf[:0], ns+int64(i)*1000)
		}
	})
	b.Run("time.AppendFormat", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			buf = time.Unix(0, ns+int64(i)*1000).UTC().AppendFormat(buf[:0], time.RFC3339Nano)
		}
	})
}
