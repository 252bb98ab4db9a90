package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/localpg"
)

// TestReadmeWalkthrough is the newcomer path of the README, verbatim: `make
// run` (private Postgres cluster under the data dir, built-in config,
// generated JWT secret), then the walk-through block run by bash. Only the
// port (UBS_HTTP / EX) and the data dir (DATA / UBS_DATA_DIR) are moved so it
// cannot collide with anything else on the machine.
func TestReadmeWalkthrough(t *testing.T) {
	for _, tool := range []string{"make", "bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- walkthrough -->\\s*```bash\\n(.*?)```\\s*<!-- /walkthrough -->").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no walkthrough block")
	}
	script := string(m[1])

	data := filepath.Join(t.TempDir(), "data")
	addr := freePort(t)
	run := exec.Command("make", "--no-print-directory", "run", "DATA="+data)
	run.Dir = root
	run.Env = append(os.Environ(), "UBS_HTTP="+addr, "UBS_PG_URL=", "DATABASE_URL=", "UBS_JWT_SECRET=")
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &lockedWriter{mu: new(sync.Mutex), w: new(strings.Builder)}
	run.Stdout, run.Stderr = logs, logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = run.Wait(); close(exited) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = syscall.Kill(-run.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		// The exchange stops its private cluster on the way out; make sure.
		deadline := time.Now().Add(30 * time.Second)
		pid := filepath.Join(data, "pg", "postmaster.pid")
		for time.Now().Before(deadline) {
			if _, err := os.Stat(pid); os.IsNotExist(err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		if cl, err := localpg.Start(context.Background(), filepath.Join(data, "pg"), slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
			_ = cl.Stop()
		}
		t.Errorf("the private Postgres cluster was still running after the exchange stopped")
	}
	t.Cleanup(stop)

	client := &e2eServer{t: t, addr: addr}
	deadline := time.Now().Add(120 * time.Second)
	for !client.ready() {
		select {
		case <-exited:
			t.Fatalf("make run exited:\n%s", logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("make run not ready after 120 s:\n%s", logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "private cluster") {
		t.Fatalf("make run did not start a private Postgres cluster:\n%s", logs)
	}

	sh := exec.Command("bash", "-euo", "pipefail", "-c", script)
	sh.Dir = root
	sh.Env = append(os.Environ(), "EX=http://"+addr, "UBS_DATA_DIR="+data, "UBS_JWT_SECRET=")
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough failed: %v\n%s\nserver:\n%s", err, out, logs)
	}
	o := string(out)
	for _, want := range []string{`"status":"NEW"`, `"status":"FILLED"`, `"price":"50000.000000"`,
		`"available":"74950.000000"`, `"available":"0.50000000"`, `"asks":[["50000.000000","0.50000000"]]`} {
		if !strings.Contains(o, want) {
			t.Fatalf("walkthrough output lacks %s:\n%s", want, o)
		}
	}
	stop()
}
