package main

// This test proves the exchange binary recovers, installs the default config
// once, and shuts down gracefully on SIGTERM with a final snapshot, so the
// next start recovers the same state.

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func buildExchange(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "exchange")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// runUntilReady starts the binary, waits for its "core recovered" log line,
// sends SIGTERM and returns every JSON log record it wrote.
func runUntilReady(t *testing.T, bin, dir string) []map[string]any {
	t.Helper()
	cmd := exec.Command(bin, "--data-dir", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				lines <- rec
			}
		}
	}()
	var recs []map[string]any
	deadline := time.After(30 * time.Second)
	signalled := false
	for {
		select {
		case rec, ok := <-lines:
			if !ok {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("exchange exited with %v", err)
				}
				return recs
			}
			recs = append(recs, rec)
			msg, _ := rec["msg"].(string)
			if !signalled && (strings.Contains(msg, "default config installed") ||
				(strings.Contains(msg, "core recovered") && rec["durable_seq"].(float64) > 0)) {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				signalled = true
			}
		case <-deadline:
			t.Fatal("exchange did not start and stop within 30 s")
		}
	}
}

func find(recs []map[string]any, msg string) map[string]any {
	for _, r := range recs {
		if m, _ := r["msg"].(string); strings.Contains(m, msg) {
			return r
		}
	}
	return nil
}

func TestExchangeStartStopRecover(t *testing.T) {
	bin, dir := buildExchange(t), t.TempDir()
	first := runUntilReady(t, bin, dir)
	if find(first, "default config installed") == nil {
		t.Fatal("fresh start did not install the default config")
	}
	stop := find(first, "exchange: stopped")
	if stop == nil {
		t.Fatal("no graceful stop record")
	}
	second := runUntilReady(t, bin, dir)
	if find(second, "default config installed") != nil {
		t.Fatal("config installed twice")
	}
	rec := find(second, "journal: recovered")
	if rec == nil || rec["state_hash"] != stop["state_hash"] || rec["snapshot_seq"].(float64) != stop["seq"].(float64) {
		t.Fatalf("recovered %v, stopped with %v", rec, stop)
	}
}
