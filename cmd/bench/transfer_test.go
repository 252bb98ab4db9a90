package main

// This test runs `bench transfer` in-process on the local Postgres: with
// --json stdout is exactly one JSON line holding the three modes and the
// ratios; bad flags are usage errors.

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/persist/pgtest"
)

func TestTransferReport(t *testing.T) {
	code, out, errs := runBench(t, "transfer", "--pg-url", pgtest.AdminURL(), "--users", "16", "--clients", "4",
		"--pool", "8", "--duration", "300ms", "--warmup", "100ms", "--json")
	if code != exitOK {
		if strings.Contains(errs, "connect") && os.Getenv("CI") == "" {
			t.Skipf("Postgres unreachable: %s", errs)
		}
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("stdout has %d lines: %q", len(lines), out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q", err, out)
	}
	for _, k := range []string{"database", "users", "clients", "pool", "duration_s", "naive", "fsm",
		"tps_ratio_fsm_naive", "p99_ratio_fsm_naive"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("report lacks %q: %s", k, out)
		}
	}
	for _, mode := range []string{"naive", "fsm"} {
		r, _ := m[mode].(map[string]any)
		if tps, _ := r["tps"].(float64); tps <= 0 || r["failed"] != 0.0 {
			t.Fatalf("%s: %v", mode, r)
		}
	}
}

func TestTransferUsage(t *testing.T) {
	for _, args := range [][]string{{"transfer", "extra"}, {"transfer", "--bogus"}} {
		if code, _, _ := runBench(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, _, errs := runBench(t, "transfer", "--users", "2", "--clients", "4"); code != exitFail ||
		!strings.Contains(errs, "users") {
		t.Errorf("--users 2 --clients 4: exit %d, %q", code, errs)
	}
}
