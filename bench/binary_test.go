package bench

// binary_test.go runs the binary scenario small: both sides apply exactly
// their streams (each ends at the state a plain run of its stream reaches),
// every run is measured, and the stream is a binary mix of all four fill
// kinds.

import (
	"testing"

	"github.com/ubscore/ubscore/bench/binaryshape"
)

func TestRunBinary(t *testing.T) {
	const n = 30_000 // more than one segment: the sides take turns
	cfg := BinaryConfig{Commands: n, Runs: 2, Seed: 4, Users: 400, PerBook: 40}
	res, err := RunBinary(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	w, err := binaryshape.Generate(binaryshape.Config{Seed: 4, Commands: n, Users: 400, TargetLive: 40})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stream != n || res.BinaryHash != w.EndHash {
		t.Errorf("binary side: %d commands, state %s; the stream's own run ends at %s", res.Stream, res.BinaryHash, w.EndHash)
	}
	p, err := RunProcessor(ProcessorConfig{Commands: n, Seed: 4, Workload: Options{Users: 400, SeedPerBook: 40}})
	if err != nil {
		t.Fatal(err)
	}
	if res.MixedHash != p.StateHash {
		t.Errorf("mixed side ends at %s, the processor scenario at %s", res.MixedHash, p.StateHash)
	}
	if res.BinaryPerSec <= 0 || res.MixedPerSec <= 0 || res.Ratio <= 0 || len(res.Ratios) != 2 || res.Runs != 2 {
		t.Errorf("rates: %+v", res)
	}
	if res.TransferYes <= 1 || res.TransferNo <= 1 || res.Mint <= 1 || res.Burn <= 1 || res.Cancels < 20 ||
		res.Rejected <= 0 || res.Rejected > 5 {
		t.Errorf("mix: %+v", res)
	}
	for _, bad := range []BinaryConfig{{Commands: 0, Runs: 1, Users: 400, PerBook: 40}, {Commands: 10, Runs: 1, Users: 401, PerBook: 40},
		{Commands: 10, Runs: 0, Users: 400, PerBook: 40}, {Commands: 10, Runs: 1, Users: 400}} {
		if _, err := RunBinary(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
