package core

// This file proves a binary market's question (issue 22, item 6): the
// config command sets it, the core refuses a bad one with
// INVALID_QUESTION and changes nothing, it travels through the codec, it is
// in the version-4 snapshot and the state hash, and a version-3 snapshot
// (testdata/snapshot_v3.bin, written before questions) still restores,
// every market with the empty question.

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func binaryCfgCmd(m MarketID, q string) Command {
	return Command{Kind: KindConfigBinary, Market: m, Amount: 100, Cfg: MarketCfg{Quote: 2, Lot: 1, MinQty: 1,
		MaxQty: 1000}, Text: q}
}

func TestBinaryQuestionStored(t *testing.T) {
	d := newDrv(t)
	long := strings.Repeat("é", MaxQuestionLen/2) // 256 bytes, 128 runes
	for m, q := range map[MarketID]string{5: "Will ETH trade above 5000 USDT on 2027-01-01?", 6: long, 7: ""} {
		d.ok(binaryCfgCmd(m, q))
		if v, ok := d.p.Binary(m); !ok || v.Question != q {
			t.Fatalf("market %d: question %q, want %q", m, v.Question, q)
		}
	}
	// a DRAFT market's reconfiguration replaces its question
	d.ok(binaryCfgCmd(5, "Reworded?"))
	if v, _ := d.p.Binary(5); v.Question != "Reworded?" {
		t.Fatalf("reconfigured: %q", v.Question)
	}
}

func TestBinaryQuestionRefused(t *testing.T) {
	bad := map[string]string{
		"too long":      strings.Repeat("a", MaxQuestionLen+1),
		"too long utf8": strings.Repeat("é", MaxQuestionLen/2) + "a",
		"invalid utf8":  "Will it \xff rain?",
		"cut rune":      "caf\xc3",
		"surrogate":     "a\xed\xa0\x80b",
		"newline":       "line one\nline two",
		"tab":           "a\tb",
		"nul":           "a\x00b",
		"escape":        "\x1b[31mred",
		"del":           "a\x7fb",
		"c1":            "a\u0085b",
	}
	for name, q := range bad {
		t.Run(name, func(t *testing.T) {
			d := newDrv(t)
			d.ok(binaryCfgCmd(5, "Original?"))
			before := d.p.AppendSnapshot(nil)
			d.code(binaryCfgCmd(6, q), CodeInvalidQuestion)
			d.code(binaryCfgCmd(5, q), CodeInvalidQuestion)
			if _, ok := d.p.Binary(6); ok {
				t.Fatal("a market was created with a bad question")
			}
			if v, _ := d.p.Binary(5); v.Question != "Original?" {
				t.Fatalf("the DRAFT market's question changed to %q", v.Question)
			}
			// nothing but the sequence moved
			d.p.lastSeq, d.p.lastTime = 1, 1000
			after := d.p.AppendSnapshot(nil)
			r, err := Restore(Config{}, before)
			if err != nil {
				t.Fatal(err)
			}
			r.lastSeq, r.lastTime = 1, 1000
			if !bytes.Equal(r.AppendSnapshot(nil), after) {
				t.Fatal("a refused question changed the state")
			}
		})
	}
}

// TestBinaryQuestionCodec: the config command's question round-trips
// through the WAL codec, at the longest question too.
func TestBinaryQuestionCodec(t *testing.T) {
	for _, q := range []string{"Will it rain?", strings.Repeat("€", MaxQuestionLen/3)} {
		c := binaryCfgCmd(5, q)
		c.Seq, c.Time = 7, 7000
		var got Command
		if err := DecodeCommand(EncodeCommand(nil, &c), &got); err != nil {
			t.Fatal(err)
		}
		if got != c {
			t.Fatalf("decoded %+v, want %+v", got, c)
		}
	}
}

// TestBinaryQuestionSnapshot: the question is in the snapshot (version 4 on)
// and its hash, and restores.
func TestBinaryQuestionSnapshot(t *testing.T) {
	snap := binarySeedSnapshot(t)
	if snap[0] != SnapshotVersion || SnapshotVersion < 4 {
		t.Fatalf("snapshot version %d", snap[0])
	}
	q, err := Restore(Config{}, snap)
	if err != nil {
		t.Fatal(err)
	}
	for m, want := range seedQuestions {
		if v, _ := q.Binary(m); v.Question != want {
			t.Fatalf("restored market %d: %q, want %q", m, v.Question, want)
		}
	}
	if !bytes.Equal(q.AppendSnapshot(nil), snap) {
		t.Fatal("the restored state serializes differently")
	}
	other := map[MarketID]string{9: seedQuestions[9], 10: seedQuestions[10], 11: "R"}
	if binarySeedState(t, other).StateHash() == q.StateHash() {
		t.Fatal("two states that differ only in a question hash the same")
	}
	// a stored question the core would refuse is a corrupt snapshot
	for _, bad := range []string{"a\nb", "\xff", strings.Repeat("a", MaxQuestionLen+1)} {
		p := binarySeedState(t, seedQuestions)
		p.markets[9].bin.question = bad
		if _, err := Restore(Config{}, p.AppendSnapshot(nil)); err == nil {
			t.Fatalf("a snapshot with question %q restores", bad)
		}
	}
}

// TestRestoreSnapshotV3: testdata/snapshot_v3.bin (binarySeedState without
// questions, written by the version-3 core at 4ae9f31) restores to exactly
// the state the current core reaches with the same commands, every binary
// market with the empty question, and re-encodes as version 4.
func TestRestoreSnapshotV3(t *testing.T) {
	v3, err := os.ReadFile("testdata/snapshot_v3.bin")
	if err != nil {
		t.Fatal(err)
	}
	if v3[0] != 3 {
		t.Fatalf("fixture version %d", v3[0])
	}
	got, err := Restore(Config{}, v3)
	if err != nil {
		t.Fatal(err)
	}
	for m := MarketID(9); m <= 11; m++ {
		if v, ok := got.Binary(m); !ok || v.Question != "" {
			t.Fatalf("market %d: ok %v, question %q", m, ok, v.Question)
		}
	}
	want := binarySeedState(t, nil)
	snap := got.AppendSnapshot(nil)
	if snap[0] != SnapshotVersion || !bytes.Equal(snap, want.AppendSnapshot(nil)) {
		t.Fatal("restored v3 state differs from the replayed one")
	}
	if v := got.CheckInvariants(); len(v) != 0 {
		t.Fatalf("invariants %+v", v)
	}
	if _, err := Restore(Config{}, snap); err != nil {
		t.Fatalf("its version-4 re-encoding: %v", err)
	}
}
