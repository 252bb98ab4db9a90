package bench

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// TestBuildLargeStateAsBefore: the builder factored out of RunRestart
// builds the state RunRestart built before (the hashes below are those of
// RunRestart's own code before the factoring, its clock fixed at
// DefaultTime), and a start on the dir recovers it.
func TestBuildLargeStateAsBefore(t *testing.T) {
	for _, c := range []struct {
		s    LargeState
		want string
	}{
		{LargeState{Accounts: 1000, Orders: 1000, Markets: 7, Pending: 100, Binary: 3},
			"9fe075c0f2d5ce20e16d157eb61f1e7e3b1577bf25234efa02c0e862d88f2203"},
		{LargeState{Accounts: 1000, Orders: 600, Markets: 100, Pending: 1000, Binary: 10},
			"1a7cd4e02b34106bd143d56cc7750131d2f85b5fcc3ac9904e72bce14225b358"},
	} {
		dir := t.TempDir()
		c.s.EndTime, c.s.Hash = DefaultTime, true
		b, err := BuildLargeState(dir, c.s)
		if err != nil {
			t.Fatal(err)
		}
		if b.StateHash != c.want {
			t.Fatalf("%+v: state hash %s, want %s (as RunRestart built it)", c.s, b.StateHash, c.want)
		}
		pl, err := journal.Start(journal.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		got, seq := pl.Processor().StateHash(), pl.AckedSeq()
		if err := pl.Close(); err != nil {
			t.Fatal(err)
		}
		if got != c.want || seq != b.Seq {
			t.Fatalf("%+v: recovered seq %d hash %s, want %d %s", c.s, seq, got, b.Seq, c.want)
		}
		if _, err := BuildLargeState(dir, c.s); err == nil {
			t.Fatal("a second build into the same dir was accepted")
		}
	}
}

var tinyLarge = LargeState{Accounts: 3000, Orders: 2500, Markets: 10, Pending: 300, Binary: 2}

// onLarge applies the workload for seqs base+1..base+n to p (the large
// state restored), at the pipeline's fixed time, and returns each
// command's result code.
func onLarge(t *testing.T, p *core.Processor, w *Workload, base core.Seq, n int) []core.Code {
	t.Helper()
	codes := make([]core.Code, n)
	var c core.Command
	for i := range n {
		seq := base + core.Seq(i+1)
		w.Fill(seq, &c)
		c.Seq, c.Time = seq, DefaultTime
		evs := p.Apply(&c)
		codes[i] = evs[len(evs)-1].Code
	}
	return codes
}

// TestShiftedWorkloadOnLargeState: the workload shifted onto the large
// state does what it does on an empty core, command for command (same
// result codes: its cancels find their orders, its places their users'
// funds), and leaves the state's accounts and orders in place.
func TestShiftedWorkloadOnLargeState(t *testing.T) {
	dir := t.TempDir()
	s := tinyLarge
	s.EndTime = DefaultTime
	b, err := BuildLargeState(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	_, snap, err := journal.LatestSnapshotIn(filepath.Join(dir, journal.SnapshotDir))
	if err != nil {
		t.Fatal(err)
	}
	onState, err := core.Restore(core.Config{}, snap)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorkload(3, Options{Users: 200, Markets: 2, SeedPerBook: 100})
	if err != nil {
		t.Fatal(err)
	}
	const n = 30_000
	got := onLarge(t, onState, w.On(ShiftOf(b)), b.Seq, n)
	want := onLarge(t, core.New(core.Config{}), w, 0, n)
	bad := 0
	for i := range n {
		if got[i] != want[i] {
			bad++
			if bad < 5 {
				t.Errorf("command %d: %v on the large state, %v alone", i+1, got[i], want[i])
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d commands differ", bad, n)
	}
	if v := onState.CheckInvariants(); len(v) != 0 {
		t.Fatalf("invariants: %+v", v)
	}
	if u := onState.Users(); u < s.Accounts+200 {
		t.Fatalf("%d accounts, want at least %d + 200", u, s.Accounts)
	}
	if o := onState.RestingOrders(); o < s.Orders {
		t.Fatalf("%d resting orders, want at least the state's %d", o, s.Orders)
	}
}

// TestPipelineOnLargeState: RunPipeline with Large runs the workload on top
// of the state it wrote into the dir (fails if the state is not under the
// workload): the seqs follow the state's, the data dir ends with the state
// plus the workload (the same hash as both applied straight through a
// core), snapshots of it are written, and the latency excludes the state.
func TestPipelineOnLargeState(t *testing.T) {
	dir := t.TempDir()
	large := tinyLarge
	opts := Options{Users: 200, Markets: 2, SeedPerBook: 100}
	const n = 20_000
	res, err := RunPipeline(PipelineConfig{Dir: dir, Commands: n, Producers: 2, Seed: 3, Workload: opts, Large: &large,
		Journal: journal.Config{NoSync: true, ReadView: true, SnapshotEvery: 5_000}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Large.Seq == 0 || res.LastSeq != res.Large.Seq+n {
		t.Fatalf("last seq %d, want the state's %d + %d", res.LastSeq, res.Large.Seq, n)
	}
	w, _ := NewWorkload(3, opts)
	if want := res.Large.Seq + core.Seq(w.SetupLen()); res.LatencyFromSeq <= want {
		t.Fatalf("latency from seq %d, want after the state and the setup (%d)", res.LatencyFromSeq, want)
	}
	if seq, snap, err := journal.LatestSnapshotIn(filepath.Join(dir, journal.SnapshotDir)); err != nil || seq <= uint64(res.Large.Seq) || len(snap) < res.Large.SnapshotBytes {
		t.Fatalf("latest snapshot at seq %d of %d bytes (%v); want one past the state's seq %d, at least its %d bytes (%d snapshots while running)",
			seq, len(snap), err, res.Large.Seq, res.Large.SnapshotBytes, res.Snapshots)
	}
	// The same state straight through a core.
	ref := t.TempDir()
	large.EndTime = DefaultTime
	b, err := BuildLargeState(ref, large)
	if err != nil {
		t.Fatal(err)
	}
	_, snap, err := journal.LatestSnapshotIn(filepath.Join(ref, journal.SnapshotDir))
	if err != nil {
		t.Fatal(err)
	}
	p, err := core.Restore(core.Config{}, snap)
	if err != nil {
		t.Fatal(err)
	}
	onLarge(t, p, w.On(ShiftOf(b)), b.Seq, n)
	if want := p.StateHash(); res.StateHash != want {
		t.Fatalf("state hash %s, want %s (the large state, then the workload)", res.StateHash, want)
	}
	if p.Users() < large.Accounts || p.RestingOrders() < large.Orders {
		t.Fatalf("reference state holds %d users, %d orders", p.Users(), p.RestingOrders())
	}
}
