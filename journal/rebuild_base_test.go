package journal

import (
	"errors"
	"testing"

	"github.com/ubscore/ubscore/core"
)

// TestRebuildRefusesABaseAhead: a poison rebuild whose base is past the
// seq it must reach (the state follower snapshotted beyond the command the
// processor discards) is refused (errBaseAhead: discard then takes an older
// snapshot), never returned as the state at the wrong seq.
func TestRebuildRefusesABaseAhead(t *testing.T) {
	p := core.New(core.Config{})
	cmds := setupCmds()
	for i := range cmds[:5] {
		c := cmds[i]
		c.Seq = core.Seq(i + 1)
		p.Apply(&c)
	}
	base := p.AppendSnapshot(nil)
	if _, err := rebuild(base, nil, core.Config{}, 3, map[core.Seq]core.Rollback{}); !errors.Is(err, errBaseAhead) {
		t.Fatalf("rebuild to seq 3 from a base at seq 5: %v, want errBaseAhead", err)
	}
}
