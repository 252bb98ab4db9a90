package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ubscore/ubscore/gateway/openapitest"
	"github.com/ubscore/ubscore/persist/localpg"
)

// TestReadmeWalkthrough is the newcomer path of the README, verbatim: `make
// run DATA=dir` (private Postgres cluster under the data dir, built-in
// config, generated JWT secret), then the walk-through block run by bash
// with DATA=dir, as the README says. Only the port (UBS_HTTP / EX) and the
// data dir are moved so it cannot collide with anything else on the
// machine. Every answer must match the "# =>" line the README shows under
// its call ("…" stands for any value), and every answer must match the
// OpenAPI document (the calls go through a checking proxy).
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel() // waits on servers and Postgres more than it computes
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

	// The walk-through talks to the server through a proxy that checks
	// every answer against the OpenAPI document, as the harness's client does.
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})
	proxy.Transport = openapitest.Transport(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	psrv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = psrv.Serve(ln) }()
	defer psrv.Close()

	sh := exec.Command("bash", "-euo", "pipefail", "-c", script)
	sh.Dir = root
	sh.Env = append(os.Environ(), "EX=http://"+ln.Addr().String(), "DATA="+data, "UBS_DATA_DIR=", "UBS_JWT_SECRET=")
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough failed: %v\n%s\nserver:\n%s", err, out, logs)
	}
	var want []string
	for _, line := range strings.Split(script, "\n") {
		if e, ok := strings.CutPrefix(line, "# => "); ok {
			want = append(want, e)
		}
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			got = append(got, line)
		}
	}
	if len(want) < 15 || len(got) != len(want) {
		t.Fatalf("the walkthrough printed %d answers, the README shows %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if err := matchShown(got[i], want[i]); err != nil {
			t.Errorf("answer %d: %v\n got %s\nwant %s", i+1, err, got[i], want[i])
		}
	}
	stop()
}

// matchShown compares an answer with the README's rendering of it: the same
// JSON, where the string "…" in the README stands for any non-null value.
func matchShown(got, shown string) error {
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		return fmt.Errorf("the answer is not JSON: %w", err)
	}
	if err := json.Unmarshal([]byte(shown), &w); err != nil {
		return fmt.Errorf("the README's line is not JSON: %w", err)
	}
	var match func(path string, g, w any) error
	match = func(path string, g, w any) error {
		switch wv := w.(type) {
		case string:
			if wv == "…" && g != nil {
				return nil
			}
		case map[string]any:
			gv, ok := g.(map[string]any)
			if !ok || len(gv) != len(wv) {
				return fmt.Errorf("%s: %v, shown %v", path, g, w)
			}
			for k := range wv {
				if err := match(path+"."+k, gv[k], wv[k]); err != nil {
					return err
				}
			}
			return nil
		case []any:
			gv, ok := g.([]any)
			if !ok || len(gv) != len(wv) {
				return fmt.Errorf("%s: %v, shown %v", path, g, w)
			}
			for i := range wv {
				if err := match(fmt.Sprintf("%s[%d]", path, i), gv[i], wv[i]); err != nil {
					return err
				}
			}
			return nil
		}
		if !reflect.DeepEqual(g, w) {
			return fmt.Errorf("%s: %v, shown %v", path, g, w)
		}
		return nil
	}
	return match("$", g, w)
}
