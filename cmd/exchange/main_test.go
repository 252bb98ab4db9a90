package main

// These tests run the exchange binary: it recovers, installs the default
// config once, and shuts down gracefully on SIGTERM with a final snapshot,
// so the next start recovers the same state; with no --pg-url it runs (and
// stops) a private Postgres cluster; secrets never reach its logs.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cleanEnv is the test process's environment without any UBS_* or
// DATABASE_URL setting, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "UBS_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// runUntilReady starts the binary with args (and env), waits for its core to
// be up, sends SIGTERM and returns every JSON log record it wrote, plus its
// raw stdout and stderr.
func runUntilReady(t *testing.T, bin string, env []string, args ...string) ([]map[string]any, string) {
	t.Helper()
	// A port of its own: parallel tests that start a server on the default
	// 127.0.0.1:8080 collided ("address already in use").
	cmd := exec.Command(bin, append([]string{"--http", freePort(t)}, args...)...)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var raw bytes.Buffer
	var rawMu sync.Mutex
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			rawMu.Lock()
			raw.Write(sc.Bytes())
			raw.WriteByte('\n')
			rawMu.Unlock()
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				lines <- rec
			}
		}
	}()
	var recs []map[string]any
	deadline := time.After(60 * time.Second)
	signalled := false
	for {
		select {
		case rec, ok := <-lines:
			if !ok {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("exchange exited with %v\nstdout:\n%s\nstderr:\n%s", err, raw.String(), stderr.String())
				}
				rawMu.Lock()
				defer rawMu.Unlock()
				return recs, raw.String() + stderr.String()
			}
			recs = append(recs, rec)
			msg, _ := rec["msg"].(string)
			if !signalled && (strings.Contains(msg, "default config installed") ||
				(strings.Contains(msg, "core recovered") && rec["durable_seq"].(float64) > 0)) {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				signalled = true
			}
		case <-deadline:
			t.Fatal("exchange did not start and stop within 60 s")
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

// The `make run` path: no Postgres flag or variable, so a private cluster
// under <data-dir>/pg when the host has PostgreSQL binaries.
func TestExchangeStartStopRecover(t *testing.T) {
	t.Parallel() // waits on servers and Postgres more than it computes
	bin, dir := e2eBinary(t), t.TempDir()
	env := cleanEnv()
	first, out1 := runUntilReady(t, bin, env, "--data-dir", dir)
	if find(first, "default config installed") == nil {
		t.Fatal("fresh start did not install the default config")
	}
	stop := find(first, "exchange: stopped")
	if stop == nil {
		t.Fatal("no graceful stop record")
	}
	private := find(first, "postgres: private cluster")
	if private == nil {
		if find(first, "running without Postgres") == nil || os.Getenv("CI") != "" {
			t.Fatalf("neither a private cluster nor a no-Postgres warning:\n%s", out1)
		}
		t.Log("no PostgreSQL binaries: ran without Postgres")
	} else {
		if find(first, "localpg: cluster stopped") == nil {
			t.Fatalf("private cluster not stopped:\n%s", out1)
		}
		if _, err := os.Stat(filepath.Join(dir, "pg", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("postmaster.pid left after exit: %v", err)
		}
	}
	second, out2 := runUntilReady(t, bin, env, "--data-dir", dir)
	if find(second, "default config installed") != nil {
		t.Fatal("config installed twice")
	}
	rec := find(second, "journal: recovered")
	if rec == nil || rec["state_hash"] != stop["state_hash"] || rec["snapshot_seq"].(float64) != stop["seq"].(float64) {
		t.Fatalf("recovered %v, stopped with %v", rec, stop)
	}
	if private != nil {
		again := find(second, "postgres: private cluster")
		if again == nil || again["url"] != private["url"] {
			t.Fatalf("second run's cluster %v, first %v", again, private)
		}
	}
	secret, err := os.ReadFile(filepath.Join(dir, secretFileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{out1, out2} {
		if strings.Contains(out, strings.TrimSpace(string(secret))) {
			t.Fatal("the generated JWT secret appears in the logs")
		}
	}
	if find(first, "generated a new JWT secret") == nil || find(second, "generated a new JWT secret") != nil {
		t.Fatal("the secret must be generated on the first run only")
	}
}

// A secret given by flag or environment never appears in the output, nor
// does a Postgres password.
func TestStartupLogsNoSecrets(t *testing.T) {
	t.Parallel() // waits on servers and Postgres more than it computes
	bin := e2eBinary(t)
	const flagSecret = "flag-secret-0123456789abcdef0123456789abcdef"
	const envSecret = "env-secret-0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		name, secret string
		env          []string
		args         []string
	}{
		{"flag", flagSecret, cleanEnv("UBS_PG_URL=none"), []string{"--jwt-secret", flagSecret}},
		{"env", envSecret, cleanEnv("UBS_PG_URL=none", "UBS_JWT_SECRET="+envSecret), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			recs, out := runUntilReady(t, bin, c.env, append([]string{"--data-dir", dir}, c.args...)...)
			if find(recs, "exchange: stopped") == nil {
				t.Fatalf("no clean stop:\n%s", out)
			}
			if strings.Contains(out, c.secret) || strings.Contains(out, c.secret[:20]) {
				t.Fatalf("secret in the logs:\n%s", out)
			}
			if _, err := os.Stat(filepath.Join(dir, secretFileName)); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("a secret file was generated although a secret was given")
			}
		})
	}
}
