// Package natstest runs real NATS servers with JetStream inside a test or
// benchmark process: one server, or a cluster whose nodes can be stopped
// and started again (same ports, same store) to take a quorum away and
// give it back. Servers bind 127.0.0.1 only; Start shuts them down in
// t.Cleanup, Run's caller calls Shutdown.
package natstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is n NATS servers routed to each other, JetStream on each: in
// this process (Start, Run), or real nats-server processes that StopNode
// kills with SIGKILL (StartProcs).
type Cluster struct {
	bin     string // the nats-server binary ("": servers in this process)
	procs   []*exec.Cmd
	name    string
	ports   []int // client ports
	routes  []int // cluster (route) ports
	dirs    []string
	servers []*server.Server // nil: stopped
}

// Start runs a cluster of n nodes (n = 1: a single server, no routes) for
// a test and waits until JetStream has a meta leader.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	c, err := Run(n, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// Run is Start outside a test: the nodes store under dir, and the caller
// calls Shutdown.
func Run(n int, dir string) (*Cluster, error) { return run(n, dir, "") }

func run(n int, dir, bin string) (*Cluster, error) {
	c := &Cluster{bin: bin, name: fmt.Sprintf("ubs-%d", time.Now().UnixNano()%1e6), servers: make([]*server.Server, n),
		procs: make([]*exec.Cmd, n)}
	for i := 0; i < n; i++ {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		r, err := freePort()
		if err != nil {
			return nil, err
		}
		c.ports, c.routes = append(c.ports, p), append(c.routes, r)
		c.dirs = append(c.dirs, filepath.Join(dir, fmt.Sprintf("n%d", i)))
	}
	for i := 0; i < n; i++ {
		if err := c.StartNode(i); err != nil {
			c.Shutdown()
			return nil, err
		}
	}
	if err := c.WaitReady(30 * time.Second); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// Binary is the nats-server binary StartProcs runs: $NATS_SERVER, else
// nats-server on the PATH, else /usr/sbin/nats-server ("" if none).
func Binary() string {
	for _, b := range []string{os.Getenv("NATS_SERVER"), "nats-server", "/usr/sbin/nats-server"} {
		if b == "" {
			continue
		}
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	return ""
}

// StartProcs runs a cluster of n real nats-server processes (Binary; the
// test is skipped without one), stopped by PID in t.Cleanup. StopNode kills
// a node with SIGKILL.
func StartProcs(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Binary()
	if bin == "" {
		t.Skip("no nats-server binary (set NATS_SERVER)")
	}
	c, err := run(n, t.TempDir(), bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// RunProcs is StartProcs outside a test: n nats-server processes storing
// under dir; the caller calls Shutdown.
func RunProcs(n int, dir string) (*Cluster, error) {
	bin := Binary()
	if bin == "" {
		return nil, errors.New("natstest: no nats-server binary (set NATS_SERVER)")
	}
	return run(n, dir, bin)
}

// PIDs are the running nodes' process ids (none for servers in this
// process).
func (c *Cluster) PIDs() []int {
	var pids []int
	for _, p := range c.procs {
		if p != nil {
			pids = append(pids, p.Process.Pid)
		}
	}
	return pids
}

// URL is a client URL listing every node (a client fails over among them).
func (c *Cluster) URL() string {
	urls := make([]string, len(c.ports))
	for i, p := range c.ports {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	return strings.Join(urls, ",")
}

// NodeURL is node i's client URL.
func (c *Cluster) NodeURL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.ports[i]) }

// StartNode starts node i (again), with its ports and store.
func (c *Cluster) StartNode(i int) error {
	if c.bin != "" {
		return c.startProc(i)
	}
	if c.servers[i] != nil {
		return nil
	}
	opts := &server.Options{
		ServerName: fmt.Sprintf("n%d", i),
		Host:       "127.0.0.1",
		Port:       c.ports[i],
		JetStream:  true,
		StoreDir:   c.dirs[i],
		NoLog:      true,
		NoSigs:     true,
	}
	if len(c.ports) > 1 {
		opts.Cluster = server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: c.routes[i]}
		var rs []string
		for j, p := range c.routes {
			if j != i {
				rs = append(rs, fmt.Sprintf("nats://127.0.0.1:%d", p))
			}
		}
		opts.Routes = server.RoutesFromStr(strings.Join(rs, ","))
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("natstest: node %d: %w", i, err)
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("natstest: node %d not ready", i)
	}
	c.servers[i] = s
	return nil
}

// StopNode shuts node i down (its store stays for StartNode); a process
// is killed with SIGKILL.
func (c *Cluster) StopNode(i int) {
	if p := c.procs[i]; p != nil {
		_ = p.Process.Kill()
		_ = p.Wait()
		c.procs[i] = nil
		return
	}
	if s := c.servers[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.servers[i] = nil
	}
}

// Shutdown stops every node.
func (c *Cluster) Shutdown() {
	for i := range c.servers {
		c.StopNode(i)
	}
}

// WaitReady waits until every running node is JetStream-ready and, on a
// cluster, a meta leader is elected.
func (c *Cluster) WaitReady(d time.Duration) error {
	if c.bin != "" {
		return c.waitProcs(d)
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ok := true
		for _, s := range c.servers {
			if s != nil && (!s.JetStreamEnabled() || (len(c.servers) > 1 && !s.JetStreamIsClustered())) {
				ok = false
			}
		}
		if ok && c.hasMetaLeader() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("natstest: JetStream not ready after %v", d)
}

func (c *Cluster) hasMetaLeader() bool {
	if len(c.servers) == 1 {
		return true
	}
	for _, s := range c.servers {
		if s != nil && s.JetStreamIsLeader() {
			return true
		}
	}
	return false
}

// startProc starts node i as a nats-server process.
func (c *Cluster) startProc(i int) error {
	if c.procs[i] != nil {
		return nil
	}
	args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(c.ports[i]), "-js", "-sd", c.dirs[i], "-n", fmt.Sprintf("n%d", i)}
	if len(c.ports) > 1 {
		var rs []string
		for j, p := range c.routes {
			if j != i {
				rs = append(rs, fmt.Sprintf("nats://127.0.0.1:%d", p))
			}
		}
		args = append(args, "--cluster_name", c.name, "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", c.routes[i]),
			"--routes", strings.Join(rs, ","))
	}
	cmd := exec.Command(c.bin, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("natstest: node %d: %w", i, err)
	}
	c.procs[i] = cmd
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.ports[i]), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("natstest: node %d does not listen: %w", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitProcs waits until JetStream answers an account info request through
// every running process (on a cluster: a meta leader exists).
func (c *Cluster) waitProcs(d time.Duration) error {
	deadline := time.Now().Add(d)
	for i, p := range c.procs {
		if p == nil {
			continue
		}
		for {
			nc, err := nats.Connect(c.NodeURL(i), nats.Timeout(time.Second))
			if err == nil {
				js, jerr := jetstream.New(nc)
				if jerr == nil {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					_, err = js.AccountInfo(ctx)
					cancel()
				} else {
					err = jerr
				}
				nc.Close()
			}
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("natstest: JetStream not ready on node %d after %v: %w", i, d, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("natstest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// JetStream is a JetStream client of the servers at url for the rest of
// the test (its connection is closed at the test's end); it fails the test
// if it cannot connect.
func JetStream(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
