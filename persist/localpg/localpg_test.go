package localpg

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startOrSkip starts a cluster in dir. Without PostgreSQL binaries the test
// is skipped, unless CI is set (then it fails). The cluster is stopped when
// the test ends, whatever happened.
func startOrSkip(t *testing.T, ctx context.Context, dir string) *Cluster {
	t.Helper()
	c, err := Start(ctx, dir, nil)
	if errors.Is(err, ErrNoPostgres) && os.Getenv("CI") == "" {
		t.Skipf("no PostgreSQL server binaries: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("cleanup stop: %v", err)
		}
	})
	return c
}

// assertStopped fails unless no postmaster runs for the cluster.
func assertStopped(t *testing.T, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	running, err := c.running(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if running {
		t.Fatal("postmaster still running after Stop")
	}
	if _, err := os.Stat(filepath.Join(c.dir, "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("postmaster.pid left behind: %v", err)
	}
}

func connect(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestStartStopRestartKeepsDataAndPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data", "pg")
	c := startOrSkip(t, ctx, dir)
	url := c.URL()
	conn := connect(t, ctx, url)
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil || db != Database {
		t.Fatalf("connected to %q (%v), want %q", db, err, Database)
	}
	_ = conn.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	assertStopped(t, c)
	if err := c.Stop(); err != nil { // idempotent
		t.Fatal(err)
	}

	c2 := startOrSkip(t, ctx, dir)
	if c2.URL() != url {
		t.Fatalf("restart URL %s, want the same port as %s", c2.URL(), url)
	}
	var v int
	if err := connect(t, ctx, c2.URL()).QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after restart: v=%d err=%v", v, err)
	}
	if err := c2.Stop(); err != nil {
		t.Fatal(err)
	}
	assertStopped(t, c2)
}

// A cluster left running (its owner was killed) is reused, and the reusing
// process stops it.
func TestReuseRunningCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "pg")
	c1 := startOrSkip(t, ctx, dir)
	c2 := startOrSkip(t, ctx, dir)
	if c1.URL() != c2.URL() {
		t.Fatalf("reused cluster at %s, first at %s", c2.URL(), c1.URL())
	}
	var one int
	if err := connect(t, ctx, c2.URL()).QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	if err := c2.Stop(); err != nil {
		t.Fatal(err)
	}
	assertStopped(t, c1)
}

// When the remembered port is taken by someone else, the cluster moves to a
// new port, remembers it, and keeps its data.
func TestBusyPortMoves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "pg")
	c := startOrSkip(t, ctx, dir)
	if _, err := connect(t, ctx, c.URL()).Exec(ctx, "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	old := c.port
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(old))
	if err != nil {
		t.Skipf("cannot occupy port %d: %v", old, err)
	}
	defer l.Close()
	c2 := startOrSkip(t, ctx, dir)
	if c2.port == old {
		t.Fatal("started on the busy port")
	}
	if got := c2.readPort(); got != c2.port {
		t.Fatalf("port file says %d, cluster is on %d", got, c2.port)
	}
	if _, err := connect(t, ctx, c2.URL()).Exec(ctx, "SELECT v FROM t"); err != nil {
		t.Fatalf("data lost after moving port: %v", err)
	}
	if err := c2.Stop(); err != nil {
		t.Fatal(err)
	}
	assertStopped(t, c2)
}

func TestNoBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	old := versionedBinGlob
	versionedBinGlob = filepath.Join(t.TempDir(), "*", "bin")
	defer func() { versionedBinGlob = old }()
	_, err := Start(context.Background(), filepath.Join(t.TempDir(), "pg"), nil)
	if !errors.Is(err, ErrNoPostgres) {
		t.Fatalf("err = %v, want ErrNoPostgres", err)
	}
}

func TestRefusesForeignNonEmptyDir(t *testing.T) {
	if _, err := findBinaries(""); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if c, err := Start(ctx, dir, nil); err == nil {
		_ = c.Stop()
		t.Fatal("initialised a cluster over a non-empty directory")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Fatal(err)
	}
}

func TestVersionHelpers(t *testing.T) {
	for v, want := range map[string]string{"15.8": "15", "16beta1": "16", "9.6.24": "9.6", "17": "17"} {
		if got := majorOf(v); got != want {
			t.Errorf("majorOf(%q) = %q, want %q", v, got, want)
		}
	}
	if compareVersions("9.6", "15") >= 0 || compareVersions("16", "15") <= 0 || compareVersions("15", "15") != 0 {
		t.Error("compareVersions order")
	}
}
