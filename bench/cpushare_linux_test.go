//go:build linux

package bench

import (
	"os"
	"testing"
	"time"
)

// TestSampleCPU: burning 200 ms of CPU in this process shows in its own
// clock and in the machine's busy time.
func TestSampleCPU(t *testing.T) {
	a, err := sampleCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		x++
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
