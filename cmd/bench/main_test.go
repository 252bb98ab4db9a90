package main

// These tests run the bench CLI in-process through run(): the JSON report
// has exactly the documented keys and values, progress goes to stderr, the
// same seed gives the same state hash in fresh dirs, and a dir that already
// holds a WAL is refused. The end-to-end check against `replay verify` with
// the real binaries lives in cmd/replay.

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

var reportKeys = []string{"commands", "last_seq", "cmds_per_sec", "ack_p50_us", "ack_p99_us", "ack_p999_us", "state_hash"}

func runBench(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func pipelineArgs(dir string, seed, commands int, extra ...string) []string {
	return append([]string{"pipeline", "--seed", strconv.Itoa(seed), "--commands", strconv.Itoa(commands),
		"--producers", "4", "--data", dir, "--json"}, extra...)
}

// parseReport checks that stdout is exactly one JSON line with exactly the report keys.
func parseReport(t *testing.T, stdout string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("stdout has %d lines, want 1: %q", len(lines), stdout)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q", err, lines[0])
	}
	if len(m) != len(reportKeys) {
		t.Fatalf("report has keys %v, want exactly %v", m, reportKeys)
	}
	for _, k := range reportKeys {
		if _, ok := m[k]; !ok {
			t.Fatalf("report lacks %q: %v", k, m)
		}
	}
	return m
}

func TestPipelineReport(t *testing.T) {
	code, out, errs := runBench(t, pipelineArgs(t.TempDir(), 5, 20_000, "--users", "500", "--seed-per-book", "50")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	m := parseReport(t, out)
	if m["commands"] != 20_000.0 || m["last_seq"] != 20_000.0 {
		t.Fatalf("report %v: want 20000 commands up to seq 20000", m)
	}
	if h, _ := m["state_hash"].(string); len(h) != 64 {
		t.Fatalf("state_hash %q", m["state_hash"])
	}
	for _, k := range []string{"cmds_per_sec", "ack_p50_us", "ack_p99_us", "ack_p999_us"} {
		if v, _ := m[k].(float64); v <= 0 {
			t.Fatalf("%s = %v, want > 0", k, m[k])
		}
	}
	if !strings.Contains(errs, "acked 20000\n") {
		t.Fatalf("stderr lacks the final progress line: %q", errs)
	}
}

func TestPipelineSameSeedSameHash(t *testing.T) {
	hash := func(seed int) string {
		code, out, errs := runBench(t, pipelineArgs(t.TempDir(), seed, 5_000, "--users", "200", "--seed-per-book", "20")...)
		if code != exitOK {
			t.Fatalf("seed %d: exit %d: %s", seed, code, errs)
		}
		return parseReport(t, out)["state_hash"].(string)
	}
	a, b, c := hash(9), hash(9), hash(10)
	if a != b {
		t.Fatalf("seed 9: %s then %s", a, b)
	}
	if a == c {
		t.Fatal("seeds 9 and 10 reached the same state")
	}
}

func TestPipelineRefusesUsedDir(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := runBench(t, pipelineArgs(dir, 1, 100, "--users", "10", "--seed-per-book", "5")...); code != exitOK {
		t.Fatalf("first run: exit %d: %s", code, errs)
	}
	code, out, errs := runBench(t, pipelineArgs(dir, 1, 100, "--users", "10", "--seed-per-book", "5")...)
	if code != exitFail || out != "" || !strings.Contains(errs, "already holds a WAL") {
		t.Fatalf("second run on the same dir: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"pipeline"}, {"pipeline", "--data", "x", "extra"},
		{"pipeline", "--bogus"}} {
		if code, _, _ := runBench(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, _, errs := runBench(t, "pipeline", "--data", t.TempDir(), "--producers", "0"); code != exitFail ||
		!strings.Contains(errs, "producers") {
		t.Errorf("--producers 0: exit %d, %q", code, errs)
	}
}
