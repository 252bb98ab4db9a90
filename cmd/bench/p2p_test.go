package main

import (
	"math"
	"testing"

	"github.com/ubscore/ubscore/bench"
)

// TestOwnCoresRatio: the estimate takes out the postgres processes' time and
// the rest of the machine's beyond the baseline's, nothing else.
func TestOwnCoresRatio(t *testing.T) {
	base := &bench.CPUShare{Generator: 16, Server: 18, Other: 2, Idle: 4} // 40 us per request
	ex := &bench.CPUShare{Generator: 20, Server: 50, Postgres: 30, Other: 42, Idle: 8}
	got := ownCoresRatio(httpPair{Baseline: bench.HTTPResult{CPU: base}, Exchange: bench.HTTPResult{CPU: ex}})
	if want := 40.0 / (150 - 30 - 40); math.Abs(got-want) > 1e-12 {
		t.Fatalf("estimate %v, want %v", got, want)
	}
	if got := ownCoresRatio(httpPair{Exchange: bench.HTTPResult{CPU: ex}}); got != 0 {
		t.Fatalf("without the baseline's CPU: %v, want 0", got)
	}
}
