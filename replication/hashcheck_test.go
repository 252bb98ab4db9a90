package replication

import (
	"errors"
	"testing"

	"github.com/ubscore/ubscore/core"
)

// TestHashCompare: hashes meet whichever side comes first; equal ones
// count, a different one is ErrDivergedState and sticks.
func TestHashCompare(t *testing.T) {
	c := newHashCheck(10)
	for _, step := range []struct {
		seq  uint64
		hash string
		mine bool
	}{{10, "a", true}, {10, "a", false}, {20, "b", false}, {20, "b", true}} {
		if err := c.compare(core.Seq(step.seq), step.hash, step.mine); err != nil {
			t.Fatal(err)
		}
	}
	if c.compared.Load() != 2 || len(c.local) != 0 || len(c.remote) != 0 {
		t.Fatalf("compared %d, pending %v %v", c.compared.Load(), c.local, c.remote)
	}
	if err := c.compare(30, "x", false); err != nil {
		t.Fatal(err)
	}
	if err := c.compare(30, "y", true); !errors.Is(err, ErrDivergedState) {
		t.Fatalf("different hashes: %v", err)
	}
	if err := c.compare(40, "z", true); !errors.Is(err, ErrDivergedState) {
		t.Fatalf("divergence is not sticky: %v", err)
	}
	d := newHashCheck(10) // a side that never meets the other stays bounded
	for i := 1; i <= 2*maxPendingHashes; i++ {
		_ = d.compare(core.Seq(uint64(i)), "h", true)
	}
	if len(d.local) != maxPendingHashes {
		t.Fatalf("%d pending hashes kept, want %d", len(d.local), maxPendingHashes)
	}
}
