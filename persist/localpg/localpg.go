// Package localpg runs a private PostgreSQL cluster in a directory, so
// `make run` has a database without any setup. It drives the server binaries
// of the host (initdb, pg_ctl): nothing is downloaded.
//
// Start initialises the cluster on first use (trust auth for the "postgres"
// role, UTF8, C locale), starts it listening on 127.0.0.1 only, on a port
// chosen once and remembered in <dir>/ubscore.port (a Unix socket, if any, is
// in <dir> too, never in the system's socket directory), creates the database
// "ubscore" and returns its URL. A cluster already running in the directory
// (a previous process that did not stop it, e.g. after SIGKILL) is reused.
// Stop shuts the cluster down (pg_ctl stop -m fast). With trust auth the
// cluster is for local development only: anything that can reach
// 127.0.0.1:PORT can log in as the superuser.
//
// # Running as root
//
// PostgreSQL refuses to run as root. When the process is root (os.Geteuid()
// == 0) initdb and pg_ctl run as the "postgres" OS user (the child's uid,
// gid and supplementary groups are set through syscall.Credential, the same
// effect as `runuser -u postgres --`), the cluster directory is chown'ed to
// that user, and every ancestor of the cluster directory that the user could
// not traverse gets the o+x bit added (search only: names cannot be listed).
// Each such chmod is logged as a warning. Without a "postgres" user, Start
// returns an error wrapping ErrNoPostgres.
package localpg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoPostgres means the host cannot run a private cluster: no initdb and
// pg_ctl were found (on PATH or under /usr/lib/postgresql/*/bin), or the
// process is root and there is no "postgres" OS user to run them as. Callers
// may go on without a database.
var ErrNoPostgres = errors.New("localpg: PostgreSQL server binaries (initdb, pg_ctl) not found")

// Names and limits.
const (
	// Database is the database Start creates and its URL names.
	Database = "ubscore"
	// PortFile, in the cluster directory, holds the port chosen at first init.
	PortFile = "ubscore.port"
	// LogFile, in the cluster directory, is the server's log (pg_ctl -l).
	LogFile = "postgres.log"
	// SuperUser is the role initdb creates (and the OS user used as root).
	SuperUser = "postgres"

	pgctlWaitSecs = 60               // pg_ctl -t: start and stop wait at most this long
	cmdTimeout    = 90 * time.Second // bound on one initdb / pg_ctl run
	connectWait   = 30 * time.Second // bound on reaching a (re)used server
	maxLogSize    = 16 << 20         // the server log is rotated once beyond this
	sockPathMax   = 107              // sun_path limit, minus the NUL
)

// versionedBinGlob is where Debian-style packages put the server binaries
// (a variable so tests can point it elsewhere).
var versionedBinGlob = "/usr/lib/postgresql/*/bin"

// Cluster is a private PostgreSQL cluster started by Start.
type Cluster struct {
	dir   string
	port  int
	bins  binaries
	runAs *osUser // nil: run the binaries as this process's user
	log   *slog.Logger

	mu      sync.Mutex
	stopped bool
}

// Start makes sure a cluster is running in dir (initialising it if dir holds
// none yet, reusing it if it is already running) and that the database
// "ubscore" exists. ctx bounds the whole start; the cluster outlives it and
// must be stopped with Stop. log may be nil.
func Start(ctx context.Context, dir string, log *slog.Logger) (*Cluster, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	c := &Cluster{dir: abs, log: log}
	if os.Geteuid() == 0 {
		u, err := lookupUser(SuperUser)
		if err != nil {
			return nil, fmt.Errorf("%w: running as root and there is no %q OS user to run the server as (%v)", ErrNoPostgres, SuperUser, err)
		}
		c.runAs = u
	}
	want := c.clusterVersion()
	if c.bins, err = findBinaries(want); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(c.dir), 0o750); err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	if c.runAs != nil {
		if err := c.ensureTraversable(filepath.Dir(c.dir)); err != nil {
			return nil, err
		}
	}
	if want == "" {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	} else if c.runAs != nil {
		if err := c.chownTree(c.dir); err != nil {
			return nil, err
		}
	}
	running, err := c.running(ctx)
	if err != nil {
		return nil, err
	}
	started := false
	if running {
		if c.port, err = c.pidFilePort(); err != nil {
			return nil, err
		}
		if err := c.writePort(c.port); err != nil {
			return nil, err
		}
		log.Info("localpg: reusing the running cluster", "dir", c.dir, "port", c.port)
	} else {
		if err := c.start(ctx); err != nil {
			return nil, err
		}
		started = true
		log.Info("localpg: cluster started", "dir", c.dir, "port", c.port, "version", c.bins.version)
	}
	if err := c.ensureDatabase(ctx); err != nil {
		if started {
			if serr := c.Stop(); serr != nil {
				err = errors.Join(err, serr)
			}
		}
		return nil, err
	}
	return c, nil
}

// URL is the connection URL of the "ubscore" database (no password: trust).
func (c *Cluster) URL() string { return c.urlFor(Database) }

func (c *Cluster) urlFor(db string) string {
	return "postgres://" + SuperUser + "@127.0.0.1:" + strconv.Itoa(c.port) + "/" + db + "?sslmode=disable"
}

// Stop shuts the cluster down (pg_ctl stop -m fast -w: sessions are
// disconnected, a shutdown checkpoint is written). It stops the cluster even
// if Start found it already running. Stopping twice, or a cluster that is
// not running, is not an error.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	running, err := c.running(ctx)
	if err != nil {
		return err
	}
	if running {
		out, err := c.pgctl(ctx, "stop", "-D", c.dir, "-m", "fast", "-w", "-t", strconv.Itoa(pgctlWaitSecs))
		if err != nil {
			return fmt.Errorf("localpg: pg_ctl stop: %v: %s", err, bytes.TrimSpace(out))
		}
	}
	c.stopped = true
	c.log.Info("localpg: cluster stopped", "dir", c.dir)
	return nil
}

// --- binaries ---

type binaries struct {
	initdb, pgctl string
	version       string // full, e.g. "15.8"
	major         string // as in PG_VERSION: "15", or "9.6" before 10
}

// findBinaries looks for initdb and pg_ctl on PATH, then under
// versionedBinGlob, highest version first. If want is set (the PG_VERSION of
// an existing cluster), only binaries of that major version are accepted.
func findBinaries(want string) (binaries, error) {
	var cands []binaries
	if i, err := exec.LookPath("initdb"); err == nil {
		if p, err := exec.LookPath("pg_ctl"); err == nil {
			cands = append(cands, binaries{initdb: i, pgctl: p})
		}
	}
	dirs, _ := filepath.Glob(versionedBinGlob)
	slices.SortFunc(dirs, func(a, b string) int { // highest version first
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	for _, d := range dirs {
		i, p := filepath.Join(d, "initdb"), filepath.Join(d, "pg_ctl")
		if isExecutable(i) && isExecutable(p) {
			cands = append(cands, binaries{initdb: i, pgctl: p})
		}
	}
	if len(cands) == 0 {
		return binaries{}, ErrNoPostgres
	}
	var seen []string
	for _, b := range cands {
		v, err := binaryVersion(b.pgctl)
		if err != nil {
			seen = append(seen, b.pgctl+": "+err.Error())
			continue
		}
		b.version, b.major = v, majorOf(v)
		if want == "" || b.major == want {
			return b, nil
		}
		seen = append(seen, b.pgctl+" is "+v)
	}
	if want == "" {
		return binaries{}, fmt.Errorf("%w: no usable pg_ctl (%s)", ErrNoPostgres, strings.Join(seen, "; "))
	}
	return binaries{}, fmt.Errorf("localpg: the cluster was created by PostgreSQL %s and no binaries of that version were found (%s)",
		want, strings.Join(seen, "; "))
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// binaryVersion runs `pg_ctl --version` ("pg_ctl (PostgreSQL) 15.8 (Debian
// 15.8-1)") and returns "15.8". --version is answered before the root check.
func binaryVersion(pgctl string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, pgctl, "--version").Output()
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(out))
	for i, w := range f {
		if w == "(PostgreSQL)" && i+1 < len(f) {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("unrecognised version output %q", bytes.TrimSpace(out))
}

// majorOf maps "15.8" to "15", "16beta1" to "16" and "9.6.24" to "9.6": the
// spelling of PG_VERSION.
func majorOf(v string) string {
	parts := strings.SplitN(v, ".", 3)
	n, _ := strconv.Atoi(leadingDigits(parts[0]))
	if n < 10 && len(parts) > 1 {
		return strconv.Itoa(n) + "." + leadingDigits(parts[1])
	}
	return strconv.Itoa(n)
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// compareVersions compares dotted numeric versions ("9.6" < "15" < "16").
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(leadingDigits(pa[i]))
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(leadingDigits(pb[i]))
		}
		if x != y {
			return x - y
		}
	}
	return strings.Compare(a, b)
}

// clusterVersion is the PG_VERSION of the cluster in dir, "" if there is none.
func (c *Cluster) clusterVersion() string {
	b, err := os.ReadFile(filepath.Join(c.dir, "PG_VERSION"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// --- running the binaries ---

type osUser struct {
	name     string
	uid, gid uint32
	groups   []uint32
}

func lookupUser(name string) (*osUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	ou := &osUser{name: name, uid: uint32(uid), gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.ParseUint(s, 10, 32); err == nil {
				ou.groups = append(ou.groups, uint32(g))
			}
		}
	}
	if !slices.Contains(ou.groups, ou.gid) {
		ou.groups = append(ou.groups, ou.gid)
	}
	return ou, nil
}

// run runs a PostgreSQL binary (as c.runAs when set), from "/" so that an
// unreadable working directory does not matter, with the PG* variables of
// our environment removed (they would override what we pass).
func (c *Cluster) run(ctx context.Context, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = "/"
	cmd.WaitDelay = 5 * time.Second // never hang on a pipe a daemonised child kept
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	if u := c.runAs; u != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
		env = append(env, "USER="+u.name, "LOGNAME="+u.name)
	}
	cmd.Env = env
	return cmd.CombinedOutput()
}

func (c *Cluster) pgctl(ctx context.Context, args ...string) ([]byte, error) {
	return c.run(ctx, c.bins.pgctl, args...)
}

// running reports whether a postmaster is alive for the cluster (pg_ctl
// status: 0 = running, 3 = not running).
func (c *Cluster) running(ctx context.Context) (bool, error) {
	out, err := c.pgctl(ctx, "status", "-D", c.dir)
	if err == nil {
		return true, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		return false, nil
	}
	return false, fmt.Errorf("localpg: pg_ctl status: %v: %s", err, bytes.TrimSpace(out))
}

// --- initialisation ---

// initdb creates the cluster in a sibling temporary directory and renames it
// into place, so an interrupted initdb never leaves a half-made cluster in
// dir (the leftover is removed by the next attempt).
func (c *Cluster) initdb(ctx context.Context) error {
	if des, err := os.ReadDir(c.dir); err == nil && len(des) > 0 {
		return fmt.Errorf("localpg: %s is not empty and holds no PostgreSQL cluster (no PG_VERSION)", c.dir)
	}
	tmp := c.dir + ".initdb"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	if c.runAs != nil {
		if err := os.Chown(tmp, int(c.runAs.uid), int(c.runAs.gid)); err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
	}
	c.log.Info("localpg: initialising a new cluster", "dir", c.dir, "version", c.bins.version)
	out, err := c.run(ctx, c.bins.initdb, "-D", tmp, "--auth=trust", "-U", SuperUser,
		"--encoding=UTF8", "--locale=C")
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("localpg: initdb: %v\n%s", err, tail(out, 2048))
	}
	if err := os.Rename(tmp, c.dir); err != nil { // replaces dir if it is an empty directory
		return fmt.Errorf("localpg: %w", err)
	}
	return syncDir(filepath.Dir(c.dir))
}

// chownTree gives dir and everything in it to c.runAs.
func (c *Cluster) chownTree(dir string) error {
	uid, gid := int(c.runAs.uid), int(c.runAs.gid)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != uid || int(st.Gid) != gid) {
			if err := os.Lchown(p, uid, gid); err != nil {
				return fmt.Errorf("localpg: %w", err)
			}
		}
		return nil
	})
}

// ensureTraversable adds o+x to every directory from dir up to "/" that
// c.runAs could not search, so the server can reach its data directory.
func (c *Cluster) ensureTraversable(dir string) error {
	u := c.runAs
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		if ok && !(perm&0o001 != 0 || st.Uid == u.uid && perm&0o100 != 0 ||
			slices.Contains(u.groups, st.Gid) && perm&0o010 != 0) {
			mode := fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) | 0o001
			if err := os.Chmod(d, mode); err != nil {
				return fmt.Errorf("localpg: make %s traversable by %s: %w", d, u.name, err)
			}
			c.log.Warn("localpg: added o+x to a directory so the postgres user can reach the cluster", "dir", d)
		}
		if p := filepath.Dir(d); p == d {
			return nil
		}
	}
}

// --- start ---

// start starts the server on the remembered port, or on a new one when that
// is taken (then rewritten in PortFile). A start that fails because another
// process took the port between the check and the bind is retried.
func (c *Cluster) start(ctx context.Context) error {
	logPath := filepath.Join(c.dir, LogFile)
	c.rotateLog(logPath)
	sock := c.dir
	if len(sock)+len("/.s.PGSQL.65535.lock") > sockPathMax {
		sock = "" // no Unix socket: the path would be too long; TCP is what we use
	}
	for attempt := 0; ; attempt++ {
		port, err := c.choosePort()
		if err != nil {
			return err
		}
		c.port = port
		from := fileSize(logPath)
		opts := "-c listen_addresses=127.0.0.1 -p " + strconv.Itoa(port) + " -k " + shellQuote(sock)
		out, err := c.pgctl(ctx, "start", "-D", c.dir, "-l", logPath, "-w", "-t", strconv.Itoa(pgctlWaitSecs), "-o", opts)
		if err == nil {
			return nil
		}
		serverLog := readFrom(logPath, from)
		if attempt < 2 && (bytes.Contains(serverLog, []byte("could not bind")) || bytes.Contains(serverLog, []byte("already in use"))) {
			c.log.Warn("localpg: port taken while starting, choosing another", "port", port)
			if err := c.writePort(0); err != nil {
				return err
			}
			continue
		}
		return fmt.Errorf("localpg: pg_ctl start: %v: %s\n%s", err, bytes.TrimSpace(out), tail(serverLog, 4096))
	}
}

// choosePort returns the remembered port if it is free, else a new free
// port, which it remembers.
func (c *Cluster) choosePort() (int, error) {
	old := c.readPort()
	if old > 0 && portFree(old) {
		return old, nil
	}
	p, err := freePort()
	if err != nil {
		return 0, fmt.Errorf("localpg: choose a port: %w", err)
	}
	if old > 0 {
		c.log.Warn("localpg: the cluster's port is in use, moving to another", "old_port", old, "port", p)
	}
	return p, c.writePort(p)
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) readPort() int {
	b, err := os.ReadFile(filepath.Join(c.dir, PortFile))
	if err != nil {
		return 0
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || p <= 0 || p > 65535 {
		return 0
	}
	return p
}

// writePort atomically replaces PortFile; port 0 removes it.
func (c *Cluster) writePort(port int) error {
	path := filepath.Join(c.dir, PortFile)
	if port == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("localpg: %w", err)
		}
		return nil
	}
	if c.readPort() == port {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(port)+"\n"), 0o600); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	if c.runAs != nil {
		if err := os.Chown(tmp, int(c.runAs.uid), int(c.runAs.gid)); err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	return nil
}

// pidFilePort reads the port of a running postmaster from postmaster.pid
// (line 4).
func (c *Cluster) pidFilePort() (int, error) {
	f, err := os.Open(filepath.Join(c.dir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("localpg: running cluster: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if n == 4 {
			p, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
			if err != nil || p <= 0 || p > 65535 {
				break
			}
			return p, nil
		}
	}
	return 0, fmt.Errorf("localpg: no port in %s", f.Name())
}

// rotateLog moves a server log beyond maxLogSize to LogFile.1 (one
// generation kept), before the server is started and opens it.
func (c *Cluster) rotateLog(path string) {
	if fileSize(path) > maxLogSize {
		if err := os.Rename(path, path+".1"); err != nil {
			c.log.Warn("localpg: could not rotate the server log", "err", err)
		}
	}
}

// --- database ---

// ensureDatabase creates the "ubscore" database if it is missing. The
// server may still be starting (a reused cluster), so connecting is retried
// for up to connectWait.
func (c *Cluster) ensureDatabase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	var conn *pgx.Conn
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		var err error
		if conn, err = pgx.Connect(ctx, c.urlFor("postgres")); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localpg: connect to the cluster on port %d: %w", c.port, err)
		case <-time.After(delay):
		}
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", Database).Scan(&exists); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+Database); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42P04" { // duplicate_database: created concurrently
			return nil
		}
		return fmt.Errorf("localpg: create database %s: %w", Database, err)
	}
	c.log.Info("localpg: database created", "database", Database)
	return nil
}

// --- small helpers ---

// shellQuote quotes s for the POSIX shell pg_ctl runs the server through.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the content of p after offset (best effort, at most 1 MiB).
func readFrom(p string, off int64) []byte {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return b
}

func tail(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return append([]byte("..."), b[len(b)-n:]...)
	}
	return b
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("localpg: sync %s: %w", dir, err)
	}
	return nil
}
