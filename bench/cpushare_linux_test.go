//go:build linux

package bench

import (
	"os"
	"testing"
	"time"
)

// TestSampleCPU: burning CPU in this process shows in its own clock and in
// the machine's busy time. It spins until its own clock has moved 20 ticks
// (bounded), not for a fixed wall time: on a busy machine 200 ms of wall
// time may be much less CPU.
func TestSampleCPU(t *testing.T) {
	a, err := sampleCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		for range 1 << 20 {
			x++
		}
		if _, self, err := readProcStat("self"); err != nil || self-a.self >= 20 {
			break
		}
	}
	b, err := sampleCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// self and server are the same process read a moment apart: a tick may fall between.
	if d := b.self - a.self; d < 10 || abs64(b.server-a.server-d) > 1 || b.busy-a.busy < d-1 {
		t.Fatalf("self +%d ticks, server +%d, machine busy +%d (spun %d times)", d, b.server-a.server, b.busy-a.busy, x)
	}
	if _, err := sampleCPU(1 << 30); err == nil {
		t.Fatal("a sample of a process that does not exist")
	}
}

func abs64(v int64) int64 { return max(v, -v) }
