package journal

import "testing"

// TestGather pins the group-commit gathering policy: the journaler yields
// while the batch grows, stops at the first yield that brings nothing, never
// yields more than maxYields times or once the batch reaches maxBatch, and
// never shrinks the batch it was given.
func TestGather(t *testing.T) {
	cases := []struct {
		name      string
		hi        int64   // what WaitFor returned (next is always 1)
		arrivals  []int64 // available() after each yield
		maxBatch  int64
		maxYields int
		want      int64
		yields    int
	}{
		{"idle: one yield, nothing new", 1, []int64{1}, 100, 8, 1, 1},
		{"wave: grows, then quiet", 1, []int64{5, 40, 70, 70}, 100, 8, 70, 4},
		{"stops at maxYields", 1, []int64{2, 3, 4, 5, 6}, 100, 3, 4, 3},
		{"stops once maxBatch is reached", 1, []int64{50, 120, 130}, 100, 8, 120, 2},
		{"already full: no yield", 100, nil, 100, 8, 100, 0},
		{"off (maxYields < 0)", 1, nil, 100, -1, 1, 0},
		{"available never goes back", 10, []int64{10}, 100, 8, 10, 1},
	}
	for _, c := range cases {
		yields := 0
		avail := func() int64 {
			if yields > len(c.arrivals) {
				t.Fatalf("%s: available called after yield %d, arrivals has %d", c.name, yields, len(c.arrivals))
			}
			return c.arrivals[yields-1]
		}
		got := gather(1, c.hi, c.maxBatch, c.maxYields, avail, func() { yields++ })
		if got != c.want || yields != c.yields {
			t.Errorf("%s: gather = %d after %d yields, want %d after %d", c.name, got, yields, c.want, c.yields)
		}
	}
}
