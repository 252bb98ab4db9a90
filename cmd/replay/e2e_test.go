package main

// The done-when check of the bench and replay tools, with the real binaries:
// `bench pipeline ... --json` and then `replay verify --data D --json` print
// the same state_hash, and two bench runs with the same seed in fresh dirs
// agree.

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildTools builds cmd/bench and cmd/replay into a temp dir.
func buildTools(t *testing.T) (benchBin, replayBin string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain on PATH")
	}
	dir := t.TempDir()
	benchBin, replayBin = filepath.Join(dir, "bench"), filepath.Join(dir, "replay")
	for bin, pkg := range map[string]string{benchBin: "github.com/ubscore/ubscore/cmd/bench",
		replayBin: "github.com/ubscore/ubscore/cmd/replay"} {
		if out, err := exec.Command(goBin, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return benchBin, replayBin
}

// jsonLine runs bin and decodes its stdout, which must be exactly one JSON line.
func jsonLine(t *testing.T, bin string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("%s %v: stdout is not one JSON line (%v): %q", filepath.Base(bin), args, err, out)
	}
	return m
}

func TestDoneWhenBenchThenReplayVerify(t *testing.T) {
	benchBin, replayBin := buildTools(t)
	const seed = "21"
	for _, extra := range [][]string{nil, {"--users", "1000", "--seed-per-book", "100"}} {
		var hashes []string
		for range 2 {
			d := t.TempDir()
			args := append([]string{"pipeline", "--seed", seed, "--commands", "20000", "--producers", "4", "--data", d, "--json"}, extra...)
			b := jsonLine(t, benchBin, args...)
			v := jsonLine(t, replayBin, "verify", "--data", d, "--json")
			if b["state_hash"] != v["state_hash"] || b["last_seq"] != 20_000.0 || v["last_seq"] != 20_000.0 || v["invariants"] != "ok" {
				t.Fatalf("seed %s %v: bench %v, replay verify %v", seed, extra, b, v)
			}
			hashes = append(hashes, b["state_hash"].(string))
		}
		if hashes[0] != hashes[1] {
			t.Fatalf("seed %s %v: two runs reached %s and %s", seed, extra, hashes[0], hashes[1])
		}
	}
}

func TestBinaryExitCodes(t *testing.T) {
	_, replayBin := buildTools(t)
	err := exec.Command(replayBin, "verify", "--data", filepath.Join(t.TempDir(), "none")).Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFail {
		t.Fatalf("verify of a missing dir: %v, want exit %d", err, exitFail)
	}
}
