package chaintx

// The STUCK resubmission schedule (issue 33 item 4): base, doubling, capped;
// never below base, never above the cap.

import (
	"testing"
	"time"
)

func TestStuckBackoffSchedule(t *testing.T) {
	var got []time.Duration
	d := time.Duration(0)
	for range 8 {
		d = stuckBackoff(d, 30*time.Second, 10*time.Minute)
		got = append(got, d)
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		10 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("schedule %v, want %v", got, want)
		}
	}
	if d := stuckBackoff(0, time.Minute, 30*time.Second); d != 30*time.Second {
		t.Fatalf("a cap below the base: %v, want the cap", d)
	}
	if d := stuckBackoff(time.Second, time.Minute, time.Hour); d != time.Minute {
		t.Fatalf("a delay below the base (the base was raised): %v, want the base", d)
	}
}
