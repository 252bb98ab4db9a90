package journal

// Journaled faults replay as they were applied (issue 32's restart matrix
// found a start without --enable-fault-injection, and the replay tool,
// replaying an acknowledged fault as UNKNOWN_COMMAND: a state nobody was
// told about). FaultsMarker makes every later replay of the data dir apply
// them, with or without the flag.

import (
	"testing"

	"github.com/ubscore/ubscore/core"
)

func TestJournaledFaultsReplayWithoutTheFlag(t *testing.T) {
	dir := t.TempDir()
	pl, err := Start(Config{Dir: dir, Logger: quietLog(), Core: core.Config{AllowFaults: true}, TruncateLimit: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	cmds := setupCmds()[:5] // assets, a market, two deposits
	cmds = append(cmds, core.Command{Kind: core.KindFault, Flags: uint8(core.FaultNegativeBalance), User: 1, Asset: 1,
		Amount: 20_000_000_000})
	runAll(t, pl, cmds)
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if avail := pl.Processor().BalanceOf(1, 1).Avail; avail != -10_000_000_000 {
		t.Fatalf("the fault did not apply: available %d", avail)
	}
	hash := pl.Processor().StateHash()

	// The replay tool's way: Recover with no fault config.
	rec, err := Recover(RecoverConfig{Dir: dir, Logger: quietLog(), IgnoreSnapshots: true, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rec.WAL.Close()
	if rec.StateHash != hash {
		t.Fatalf("replay without the flag: %s, the acknowledged state %s", rec.StateHash, hash)
	}
	// A start without the flag (the server's way).
	pl, err = Start(Config{Dir: dir, Logger: quietLog(), TruncateLimit: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	// (its start-up full check finds the corruption and halts the core:
	// the state hash moves on by that halt, the balance must not)
	if avail := pl.Processor().BalanceOf(1, 1).Avail; avail != -10_000_000_000 {
		t.Fatalf("a start without the flag recovered available %d, the acknowledged -10000000000", avail)
	}
	// A data dir that never allowed faults still refuses them.
	plain := t.TempDir()
	pl, err = Start(Config{Dir: plain, Logger: quietLog(), TruncateLimit: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	r := NewReply()
	c := core.Command{Kind: core.KindFault, Flags: uint8(core.FaultNegativeBalance), User: 1, Asset: 1, Amount: 1}
	if _, err := pl.Submit(&c, r); err != nil || pl.Wait(r) != nil || r.Result().Code != core.CodeUnknownCommand {
		t.Fatalf("a fault on a data dir that never allowed them: %v %v", err, r.Result().Code)
	}
}
