package core

// FuzzRestore: the snapshot decoder (versions 1 to 4) never panics on any
// input, and whatever it accepts — including states whose aggregates break
// invariants, which recovery must be able to load and check — survives the
// full check without panicking and re-encodes to a snapshot that restores
// to the same state.

import (
	"os"
	"testing"
)

func FuzzRestore(f *testing.F) {
	if v1, err := os.ReadFile("testdata/snapshot_v1.bin"); err == nil {
		f.Add(v1)
	}
	p := New(Config{AllowFaults: true})
	seq := Seq(0)
	for _, c := range v1Commands() {
		seq++
		c.Seq = seq
		p.Apply(&c)
	}
	f.Add(p.AppendSnapshot(nil))
	seq++
	drift := Command{Seq: seq, Kind: KindFault, Flags: uint8(FaultLevelDrift), Market: 1, Side: Sell, Amount: 3}
	p.Apply(&drift)
	f.Add(p.AppendSnapshot(nil))
	f.Add(New(Config{}).AppendSnapshot(nil))
	f.Add(binarySeedSnapshot(f)) // version 4: binary markets in every phase, with questions
	if v3, err := os.ReadFile("testdata/snapshot_v3.bin"); err == nil {
		f.Add(v3)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := Restore(Config{}, b)
		if err != nil {
			return
		}
		q.CheckInvariants()
		again, err := Restore(Config{}, q.AppendSnapshot(nil))
		if err != nil {
			t.Fatalf("the re-encoding of an accepted snapshot is refused: %v", err)
		}
		if again.StateHash() != q.StateHash() {
			t.Fatal("a re-encoded snapshot restores to another state")
		}
	})
}
