package main

// The end-to-end harness: it builds the real exchange binary once, gives
// each test its own Postgres database and data dir, starts the server on a
// free 127.0.0.1 port, talks HTTP to it, and stops it by PID (SIGTERM, or
// SIGKILL for crash tests). Nothing is left running: every server is killed
// in t.Cleanup if the test did not stop it.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/gateway/openapitest"
)

var (
	e2eBuildOnce sync.Once
	e2eExe       string
	e2eBuildErr  error
)

// TestMain removes the binary e2eBinary built once the package's tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if e2eExe != "" {
		_ = os.RemoveAll(filepath.Dir(e2eExe))
	}
	os.Exit(code)
}

// e2eBinary builds ./cmd/exchange into a temp dir shared by the package's
// tests (without the race detector: the packages' own tests run with it, and
// the crash-under-load tests need the real speed).
func e2eBinary(t *testing.T) string {
	t.Helper()
	e2eBuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ubs-e2e-bin-")
		if err != nil {
			e2eBuildErr = err
			return
		}
		e2eExe = filepath.Join(dir, "exchange")
		out, err := exec.Command("go", "build", "-o", e2eExe, ".").CombinedOutput()
		if err != nil {
			e2eBuildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if e2eBuildErr != nil {
		t.Fatal(e2eBuildErr)
	}
	return e2eExe
}

const e2eSecret = "e2e-test-secret-0123456789abcdef0123456789abcdef"

// e2eServer is one running exchange process.
type e2eServer struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	dataDir string
	pgURL   string
	logs    *bytes.Buffer
	logMu   *sync.Mutex
	exited  chan struct{}
	auth    *gateway.Authenticator
	client  *http.Client
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// e2eStart starts the server on dataDir/pgURL (pgURL "" = no Postgres flag)
// and waits until /health/ready answers 200.
func e2eStart(t *testing.T, dataDir, pgURL string, extra ...string) *e2eServer {
	t.Helper()
	s := e2eLaunch(t, dataDir, pgURL, extra...)
	s.waitReady(60 * time.Second)
	return s
}

// e2eLaunch starts the server as e2eStart does, without waiting for it.
func e2eLaunch(t *testing.T, dataDir, pgURL string, extra ...string) *e2eServer {
	t.Helper()
	exe := e2eBinary(t)
	addr := freePort(t)
	args := append([]string{"--http", addr, "--data-dir", dataDir, "--jwt-secret", e2eSecret}, extra...)
	if pgURL == "" {
		pgURL = "none" // never a private cluster: a killed server would leave its postmaster running
	}
	args = append(args, "--pg-url", pgURL)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "UBS_PG_URL=", "DATABASE_URL=")
	s := &e2eServer{t: t, cmd: cmd, addr: addr, dataDir: dataDir, pgURL: pgURL,
		logs: &bytes.Buffer{}, logMu: &sync.Mutex{}, exited: make(chan struct{}),
		client: &http.Client{Timeout: 10 * time.Second, Transport: openapitest.Transport(t, nil)}}
	w := &lockedWriter{mu: s.logMu, w: s.logs}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("server %s logs:\n%s", addr, s.Logs())
		}
	})
	a, err := gateway.NewAuthenticator([]byte(e2eSecret))
	if err != nil {
		t.Fatal(err)
	}
	s.auth = a
	return s
}

// waitReady waits until /health/ready answers 200.
func (s *e2eServer) waitReady(within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		select {
		case <-s.exited:
			s.t.Fatalf("server exited during start-up:\n%s", s.Logs())
		default:
		}
		if s.ready() {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("server not ready after %v:\n%s", within, s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

// String is what was written so far.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.w)
}

// ready reports whether /health/ready answers 200.
func (s *e2eServer) ready() bool {
	c := s.client
	if c == nil {
		c = &http.Client{Timeout: 2 * time.Second}
	}
	resp, err := c.Get("http://" + s.addr + "/health/ready")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == 200
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (s *e2eServer) Logs() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.logs.String()
}

// Stop sends SIGTERM and waits for a clean exit.
func (s *e2eServer) Stop() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		s.t.Fatalf("server did not stop within 60 s of SIGTERM:\n%s", s.Logs())
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		s.t.Fatalf("server exited with %d after SIGTERM:\n%s", code, s.Logs())
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (s *e2eServer) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

func (s *e2eServer) token(user uint64, admin bool) string {
	s.t.Helper()
	tok, err := s.auth.Mint(user, admin, time.Hour, time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

// do sends a request with an optional bearer token and JSON body and
// returns the status and the decoded JSON body (nil if empty).
func (s *e2eServer) do(method, path, token string, body any) (int, map[string]any) {
	s.t.Helper()
	status, raw := s.doRaw(method, path, token, body)
	if len(bytes.TrimSpace(raw)) == 0 {
		return status, nil
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		var arr []any
		if json.Unmarshal(raw, &arr) == nil {
			return status, map[string]any{"_array": arr}
		}
		s.t.Fatalf("%s %s: body is not JSON: %v: %q", method, path, err, raw)
	}
	return status, out
}

func (s *e2eServer) doRaw(method, path, token string, body any) (int, []byte) {
	s.t.Helper()
	resp, raw, err := s.send(method, path, token, body)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, raw
}

// send sends a request (body: nil, a string, bytes, or a value sent as
// JSON) with an optional bearer token and returns the answer with its body
// read, or the error (a timeout, a connection refused) without failing the
// test.
func (s *e2eServer) send(method, path, token string, body any) (*http.Response, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, nil, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, "http://"+s.addr+path, rd)
	if err != nil {
		return nil, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp, raw, err
}

func gatewayAuthenticator(secret string) (*gateway.Authenticator, error) {
	return gateway.NewAuthenticator([]byte(secret))
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// tryDo is do that reports transport errors instead of failing (load
// clients racing a kill).
func (s *e2eServer) tryDo(method, path, token string, body any) (int, map[string]any, error) {
	resp, raw, err := s.send(method, path, token, body)
	if err != nil {
		return 0, nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return resp.StatusCode, nil, nil
	}
	return resp.StatusCode, out, nil
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
