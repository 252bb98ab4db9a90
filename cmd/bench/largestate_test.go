package main

import (
	"strings"
	"testing"
)

var tinyLargeArgs = []string{"--large-accounts", "3000", "--large-orders", "2500", "--large-markets", "10",
	"--large-pending", "300", "--large-binary", "2"}

// TestPipelineStateCompareLargeState: bench pipeline --state-compare
// --large-state writes the state into each run's dir and runs the workload
// on top of it (the runs say so, with the state's seq and size).
func TestPipelineStateCompareLargeState(t *testing.T) {
	args := append([]string{"pipeline", "--data", t.TempDir(), "--commands", "20000", "--users", "200", "--seed-per-book", "100",
		"--snapshot-every", "5000", "--nosync", "--state-compare", "1", "--large-state"}, tinyLargeArgs...)
	code, out, errs := runBench(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	for _, want := range []string{"round 0 off large state: seq 5816,", "round 0 on  large state: seq 5816,", "state follower at the last ack",
		"median ack_p50_us", "median max_apply_us", "on: last snapshot of each run (1 runs)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestStateLargeCompare: bench state --large-compare runs the closed loop,
// then the open loop at half its rate, at the large state.
func TestStateLargeCompare(t *testing.T) {
	args := append([]string{"state", "--data", t.TempDir(), "--nosync", "--large-compare", "1", "--large-commands", "20000",
		"--large-users", "200", "--large-seed-per-book", "100", "--large-snapshot-every", "5000"}, tinyLargeArgs...)
	code, out, errs := runBench(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	for _, want := range []string{"item 3 at the large state: 3000 accounts", "closed loop:", "open loop at ", "large state: seq 5816,",
		"closed loop throughput on/off"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "transfers: rss") {
		t.Fatalf("--large-compare also ran the transfers scenario:\n%s", out)
	}
}
