package journal

// replay_batch_test.go proves applyBatch's contract: a panic inside Apply is
// a poison command reported with its seq after the commands before it were
// applied; a known poison seq is skipped with POISON_COMMAND; a panic outside
// Apply (in the callback) is a bug and is not swallowed as poison.

import (
	"testing"

	"github.com/ubscore/ubscore/core"
)

// batchWithPoison returns setup commands with seqs 1.. and a debug panic at index at.
func batchWithPoison(at int) []core.Command {
	cmds := setupCmds()[:12]
	cmds = append(cmds[:at], append([]core.Command{{Kind: core.KindDebugPanic, User: 1}}, cmds[at:]...)...)
	for i := range cmds {
		cmds[i].Seq = core.Seq(i + 1)
	}
	return cmds
}

func TestApplyBatchPoison(t *testing.T) {
	const at = 7
	cmds := batchWithPoison(at)
	proc := core.New(core.Config{AllowDebugPanic: true})
	var seen []core.Seq
	n, perr := applyBatch(proc, cmds, map[core.Seq]core.Rollback{}, func(c *core.Command, _ []core.Event) { seen = append(seen, c.Seq) })
	if perr == nil || perr.seq != core.Seq(at+1) || n != at || len(seen) != at {
		t.Fatalf("applyBatch = %d, %v (callbacks %v); want %d and poison at seq %d", n, perr, seen, at, at+1)
	}

	proc = core.New(core.Config{AllowDebugPanic: true})
	var codes []core.Code
	n, perr = applyBatch(proc, cmds, map[core.Seq]core.Rollback{at + 1: {}}, func(_ *core.Command, evs []core.Event) {
		codes = append(codes, evs[len(evs)-1].Code)
	})
	if perr != nil || n != uint64(len(cmds)) || proc.LastSeq() != core.Seq(len(cmds)) {
		t.Fatalf("with the poison known: applyBatch = %d, %v, last seq %d", n, perr, proc.LastSeq())
	}
	if codes[at] != core.CodePoisonCommand {
		t.Fatalf("known poison seq answered %v, want POISON_COMMAND", codes[at])
	}
	for i, c := range codes {
		if i != at && c != core.OK {
			t.Fatalf("command %d answered %v", i, c)
		}
	}
}

func TestApplyBatchCallbackPanicPropagates(t *testing.T) {
	cmds := batchWithPoison(3)[:3]
	proc := core.New(core.Config{})
	defer func() {
		if r := recover(); r != "callback bug" {
			t.Fatalf("recovered %v, want the callback's panic", r)
		}
	}()
	applyBatch(proc, cmds, nil, func(c *core.Command, _ []core.Event) {
		if c.Seq == 2 {
			panic("callback bug")
		}
	})
	t.Fatal("applyBatch returned after its callback panicked")
}
