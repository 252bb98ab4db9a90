package main

// shape_test.go checks `bench processor --shape book`: one JSON report with
// a row per scenario and account count, both sides measured on the same
// flow, and usage errors for a bad scenario, shape or account list.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/bench"
)

func TestProcessorShapeBook(t *testing.T) {
	code, out, errs := runBench(t, "processor", "--shape", "book", "--orders", "3000", "--runs", "2",
		"--accounts", "100,1000000", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep bench.ShapeReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.Results) != 6 || len(rep.Ratios) != 6 {
		t.Fatalf("%d results, %d ratio lists, want 6 (3 scenarios x 2 account counts)", len(rep.Results), len(rep.Ratios))
	}
	for i, r := range rep.Results {
		if r.ProcPerSec <= 0 || r.BookPerSec <= 0 || r.Ratio <= 0 || r.Trades == 0 || r.Runs != 2 || len(rep.Ratios[i]) != 2 {
			t.Errorf("row %d: %+v", i, r)
		}
		if r.Ratio < rep.MinRatio {
			t.Errorf("row %d ratio %v below the reported minimum %v", i, r.Ratio, rep.MinRatio)
		}
	}
	if rep.Results[0].Accounts != 100 || rep.Results[3].Accounts != 3000 {
		t.Errorf("accounts %d and %d, want 100 and 3000 (one per order)", rep.Results[0].Accounts, rep.Results[3].Accounts)
	}
	code, out, _ = runBench(t, "processor", "--shape", "book", "--orders", "2000", "--runs", "1",
		"--accounts", "50", "--scenario", "flash-crash")
	if code != exitOK || !strings.Contains(out, "worst ratio") || !strings.Contains(out, "flash-crash") {
		t.Errorf("text report: exit %d: %s", code, out)
	}
	for _, args := range [][]string{
		{"--shape", "book", "--scenario", "static"},
		{"--shape", "book", "--accounts", "many"},
		{"--shape", "square"},
	} {
		if code, _, _ := runBench(t, append([]string{"processor"}, args...)...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}
