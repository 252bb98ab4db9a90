package main

// binary_test.go checks `bench processor --shape binary`: one JSON report
// with both sides measured and the stream's mix, a text report, and usage
// errors for bad sizes.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/bench"
)

func TestProcessorShapeBinary(t *testing.T) {
	code, out, errs := runBench(t, "processor", "--shape", "binary", "--commands", "20000", "--runs", "2",
		"--users", "300", "--seed-per-book", "30", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res bench.BinaryResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Commands != 20_000 || res.Runs != 2 || len(res.Ratios) != 2 || res.Users != 300 || res.PerBook != 30 ||
		res.BinaryPerSec <= 0 || res.MixedPerSec <= 0 || res.Ratio <= 0 || res.Mint <= 0 || res.Burn <= 0 ||
		res.TransferYes <= 0 || res.TransferNo <= 0 || res.BinaryHash == "" || res.MixedHash == "" {
		t.Errorf("report %+v", res)
	}
	code, out, _ = runBench(t, "processor", "--shape", "binary", "--commands", "5000", "--runs", "1",
		"--users", "100", "--seed-per-book", "10", "--seed", "9")
	if code != exitOK || !strings.Contains(out, "ratio") || !strings.Contains(out, "mint") {
		t.Errorf("text report: exit %d: %s", code, out)
	}
	for _, args := range [][]string{
		{"--users", "301"},
		{"--commands", "0"},
		{"--runs", "0"},
		{"--seed-per-book", "0"},
	} {
		if code, _, _ := runBench(t, append([]string{"processor", "--shape", "binary"}, args...)...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}
