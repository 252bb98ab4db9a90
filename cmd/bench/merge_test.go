package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/bench"
)

// fakeRun writes a one-run report.json with the given processor rate,
// http value/ceiling and sweep p99 at 50 %, and returns its dir.
func fakeRun(t *testing.T, profile string, proc, http, ceil, p99 float64) string {
	t.Helper()
	dir := t.TempDir()
	rep := allReport{Profile: profile, Seed: 1, Machine: machineInfo{CPU: "test", Cores: 2, GitCommit: "abc"}, Seconds: 10,
		Scenarios: []*scenarioRun{{Name: "processor", Seconds: 1}},
		Pairs: []pair{
			{Name: "processor", Unit: "cmd/s", Value: proc, Ceiling: bench.ProcessorTarget, CeilingName: "target", Ratio: proc / bench.ProcessorTarget},
			{Name: "http POST /api/v1/order", Unit: "req/s", Value: http, Ceiling: ceil, CeilingName: "hello", Ratio: http / ceil},
		},
		Sweep: &sweepReport{Target: "exchange", MaxRPS: http, Points: []sweepPoint{
			{Fraction: 0.5, Result: bench.HTTPResult{OfferedRPS: http / 2, RPS: http / 2, P50us: 100, P99us: p99, Requests: 10}},
		}}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMergeMedians(t *testing.T) {
	runs := []string{
		fakeRun(t, "full", 3e6, 10_000, 50_000, 9000),
		fakeRun(t, "full", 4e6, 30_000, 40_000, 1000),
		fakeRun(t, "full", 2e6, 20_000, 60_000, 5000),
	}
	out := filepath.Join(t.TempDir(), "merged")
	code, stdout, errs := runBench(t, append([]string{"merge", "--out", out}, runs...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.TrimSpace(stdout) != filepath.Join(out, "report.md") {
		t.Fatalf("stdout %q", stdout)
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m allReport
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Runs != 3 || m.Seconds != 30 || len(m.Pairs) != 2 || len(m.Scenarios) != 3 {
		t.Fatalf("merged %+v", m)
	}
	proc, http := m.Pairs[0], m.Pairs[1]
	if proc.Value != 3e6 || proc.Ratio != 1 || len(proc.Values) != 3 {
		t.Fatalf("processor row %+v", proc)
	}
	// Ratios 0.2, 0.75, 0.333: the median is the per-run ratio 0.333, not
	// median value / median ceiling (20000 / 50000 = 0.4).
	if http.Value != 20_000 || http.Ceiling != 50_000 || http.Ratio != 0.333 {
		t.Fatalf("http row %+v", http)
	}
	if sw := m.Sweep; sw == nil || sw.MaxRPS != 20_000 || len(sw.Points) != 1 || sw.Points[0].Result.P99us != 5000 ||
		sw.Points[0].Result.Requests != 30 {
		t.Fatalf("sweep %+v", m.Sweep)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Medians of 3 runs", "runs: 3000000 / 4000000 / 2000000", "| run 2: processor |", "(" + plotSweep + ")"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	// A merge is not merged again; runs of different profiles are refused.
	if code, _, _ := runBench(t, "merge", "--out", t.TempDir(), out); code != exitFail {
		t.Errorf("merge of a merge: exit %d", code)
	}
	if code, _, _ := runBench(t, "merge", "--out", t.TempDir(), runs[0], fakeRun(t, "quick", 1, 1, 1, 1)); code != exitFail {
		t.Errorf("mixed profiles: exit %d", code)
	}
	if code, _, _ := runBench(t, "merge", "--out", t.TempDir()); code != exitUsage {
		t.Errorf("no runs: exit %d", code)
	}
}
