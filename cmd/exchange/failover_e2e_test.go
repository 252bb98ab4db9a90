package main

// Automatic failover (issue 38) of the real binary: three exchanges started
// with the same flags (--failover auto) on a 3-node NATS cluster of real
// nats-server processes, one Postgres, the event publisher on the cluster.
// A lease decides the primary; the tests SIGKILL and SIGSTOP primaries,
// restart and wipe nodes under load, and check the clients' history
// (failover_history_test.go), the replicas' agreement, Postgres and the
// event stream.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/publish"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/replication/natstest"
)

const (
	fvTTL         = 1500 * time.Millisecond
	fvUsers       = 8
	fvServingLine = `"msg":"exchange: serving"`
)

// fvStatus is GET /admin/v1/replication.
type fvStatus struct {
	Role       string `json:"role"`
	Mode       string `json:"mode"`
	Epoch      uint64 `json:"epoch"`
	Fenced     bool   `json:"fenced"`
	StreamSeq  uint64 `json:"stream_seq"`
	Seq        uint64 `json:"seq"`
	LagCmds    uint64 `json:"lag_commands"`
	Primary    string `json:"primary"`
	Diverged   bool   `json:"diverged"`
	HashChecks uint64 `json:"hash_checks"`
}

// fvNode is one exchange of the cluster: its data dir and HTTP address stay
// across restarts.
type fvNode struct {
	id, dir, addr string
	s             *e2eServer // the running process; nil while down
	paused        bool       // SIGSTOPped
	extra         []string   // flags of this node only
	wiped         bool       // its data dir was wiped once (its WAL no longer starts at seq 1)
}

// fvCluster is the exchanges of a failover test.
type fvCluster struct {
	t      *testing.T
	nats   *natstest.Cluster
	pg     string
	stream string   // the event publisher's stream
	args   []string // every node's flags
	nodes  []*fvNode
}

// fvStartCluster starts n exchanges with the same flags (--failover auto)
// and waits until every one is ready.
func fvStartCluster(t *testing.T, nc *natstest.Cluster, pg string, n int) *fvCluster {
	t.Helper()
	c := &fvCluster{t: t, nats: nc, pg: pg, stream: fmt.Sprintf("FV_EVENTS_%d", time.Now().UnixNano()%1e9)}
	c.args = []string{"--failover", "auto", "--replication", "sync", "--replication-url", nc.URL(),
		"--replication-replicas", "3", "--replication-hash-every", "200", "--snapshot-every", "500",
		"--lease-ttl", fvTTL.String(), "--nats-url", nc.URL(), "--nats-stream", c.stream,
		"--nats-subject-prefix", "fvev."} // the default ubs. would overlap the log's ubs.log.*
	c.add(n)
	for i := range c.nodes {
		c.launch(i)
	}
	for _, nd := range c.nodes {
		nd.s.waitReady(90 * time.Second)
	}
	return c
}

// add adds n nodes (not started), each with its data dir and address.
func (c *fvCluster) add(n int) {
	base := c.t.TempDir()
	for i := 0; i < n; i++ {
		c.nodes = append(c.nodes, &fvNode{id: string(rune('a' + i)), dir: filepath.Join(base, string(rune('a'+i))), addr: freePort(c.t)})
	}
}

// launch starts node i's process (same flags, data dir and address as
// always) without waiting for it.
func (c *fvCluster) launch(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	args := append(slices.Clone(c.args), nd.extra...)
	args = append(args, "--node-id", nd.id, "--http", nd.addr) // after e2eLaunch's own --http: the last one counts
	s := e2eLaunch(c.t, nd.dir, c.pg, args...)
	s.addr = nd.addr
	nd.s = s
	if os.Getenv("UBS_FAILOVER_LOGS") != "" { // every process's replication story, WARN and worse, even when the test passes
		c.t.Cleanup(func() {
			for _, l := range strings.Split(s.Logs(), "\n") {
				info := strings.Contains(l, `"level":"INFO"`) || strings.Contains(l, `"level":"DEBUG"`)
				story := strings.Contains(l, `"msg":"replication: `) || strings.Contains(l, `"msg":"exchange: `)
				if l != "" && !strings.Contains(l, "gateway: request failed") && (!info || story) {
					c.t.Logf("node %s: %s", nd.id, l)
				}
			}
		})
	}
	nd.paused = false
}

// restart launches node i again and waits until it is ready.
func (c *fvCluster) restart(i int) {
	c.t.Helper()
	c.launch(i)
	c.nodes[i].s.waitReady(90 * time.Second)
}

// kill SIGKILLs node i.
func (c *fvCluster) kill(i int) {
	nd := c.nodes[i]
	if nd.paused {
		_ = nd.s.cmd.Process.Signal(syscall.SIGCONT)
	}
	nd.s.Kill()
	nd.s, nd.paused = nil, false
}

func (c *fvCluster) signal(i int, sig syscall.Signal) {
	c.t.Helper()
	if err := c.nodes[i].s.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("node %s: %v: %v", c.nodes[i].id, sig, err)
	}
	c.nodes[i].paused = sig == syscall.SIGSTOP
}

func (c *fvCluster) addrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.addr)
	}
	return out
}

// status reads node i's GET /admin/v1/replication (false: no answer).
// noFlap requires node p to be the primary at epoch: no take-over (and
// no lost lease) happened since that epoch's claim.
func (c *fvCluster) noFlap(p int, epoch uint64) {
	c.t.Helper()
	st, ok := c.status(p)
	if !ok || st.Role != "primary" || st.Epoch != epoch {
		c.t.Fatalf("a failover without a kill or a pause: node %s is %+v (reachable %v), want the primary at epoch %d",
			c.nodes[p].id, st, ok, epoch)
	}
}

func (c *fvCluster) status(i int) (fvStatus, bool) {
	nd := c.nodes[i]
	if nd.s == nil || nd.paused {
		return fvStatus{}, false
	}
	a, err := nd.s.replTry("GET", "/admin/v1/replication", nd.s.token(1000, true), nil)
	var st fvStatus
	if err != nil || a.status != 200 || json.Unmarshal(a.body, &st) != nil {
		return fvStatus{}, false
	}
	return st, true
}

// waitPrimary waits until exactly one running node says it is the primary
// and answers ready, and returns it.
func (c *fvCluster) waitPrimary(within time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		p, seen := -1, ""
		n := 0
		for i := range c.nodes {
			st, ok := c.status(i)
			seen += fmt.Sprintf(" %s:%v/%s", c.nodes[i].id, ok, st.Role)
			if ok && st.Role == "primary" && !st.Fenced {
				p = i
				n++
			}
		}
		if n == 1 && c.nodes[p].s.ready() {
			return p
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no single ready primary within %v:%s", within, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitStandby waits until node i is a standby of primary p (not diverged)
// whose seq reached seq.
func (c *fvCluster) waitStandby(i, p int, seq uint64, within time.Duration) fvStatus {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, ok := c.status(i)
		if ok && st.Diverged {
			c.t.Fatalf("node %s diverged: %+v", c.nodes[i].id, st)
		}
		if ok && st.Role == "standby" && st.Seq >= seq && st.Primary == c.nodes[p].id+"@"+c.nodes[p].addr {
			return st
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %s is no standby of %s at seq >= %d within %v: %+v (answered %v)", c.nodes[i].id, c.nodes[p].id, seq, within, st, ok)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// seqOf is primary p's seq (its replication status).
func (c *fvCluster) seqOf(p int) uint64 {
	c.t.Helper()
	st, ok := c.status(p)
	if !ok {
		c.t.Fatalf("node %s does not answer its replication status", c.nodes[p].id)
	}
	return st.Seq
}

// waitLog waits until node i's log holds line (count times at least).
func (c *fvCluster) waitLog(i int, line string, count int, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for strings.Count(c.nodes[i].s.Logs(), line) < count {
		if time.Now().After(deadline) {
			c.t.Fatalf("node %s did not log %s (%d times) within %v:\n%s", c.nodes[i].id, line, count, within, c.nodes[i].s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// takeover waits up to within for a 200 of a node other than old,
// answered after t0 (old was killed or paused at t0), and returns that node
// and the time since t0 (the failover time). Besides the load's answers
// it probes the other nodes itself: the load clients may be waiting out
// their timeout on a paused node.
func (c *fvCluster) takeover(h *fvHistory, t0 time.Time, within time.Duration, old int) (int, time.Duration, bool) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for i := 0; ; i++ {
		if op, ok := h.firstOK(t0, old); ok {
			return op.node, op.end.Sub(t0), true
		}
		if time.Now().After(deadline) {
			return -1, 0, false
		}
		if n := i % len(c.nodes); n != old && c.nodes[n].s != nil && !c.nodes[n].paused {
			h.probe(n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dumpStacks makes every running node print its goroutines and exit
// (SIGQUIT), for the logs of a test that failed on a stuck node.
func (c *fvCluster) dumpStacks() {
	for _, nd := range c.nodes {
		if nd.s == nil {
			continue
		}
		if nd.paused {
			_ = nd.s.cmd.Process.Signal(syscall.SIGCONT)
		}
		_ = nd.s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-nd.s.exited:
		case <-time.After(10 * time.Second):
		}
	}
}

// waitTakeover is takeover that fails the test if no node takes over.
func (c *fvCluster) waitTakeover(h *fvHistory, t0 time.Time, within time.Duration, old int) (int, time.Duration) {
	c.t.Helper()
	n, d, ok := c.takeover(h, t0, within, old)
	if !ok {
		c.dumpStacks()
		c.t.Fatalf("no 200 from a new primary within %v of %v (node %s out)", within, t0.Format("15:04:05.000"), c.nodes[old].id)
	}
	return n, d
}

// waitLoad waits until the history holds n more ok ops than now (the load
// goes through).
func (c *fvCluster) waitLoad(h *fvHistory, n int, within time.Duration) {
	c.t.Helper()
	want := h.counts()[fvOK] + n
	deadline := time.Now().Add(within)
	for h.counts()[fvOK] < want {
		if time.Now().After(deadline) {
			c.t.Fatalf("the load did not get %d more orders through within %v: %v", n, within, h.counts())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// agree waits (load stopped) until every node is at the same seq, one the
// primary and the others its standbys, then requires equal reads (depth,
// every user's SPOT balances at that seq) and no divergence; it returns the
// primary.
func (c *fvCluster) agree(within time.Duration) int {
	c.t.Helper()
	p := c.waitPrimary(within)
	deadline := time.Now().Add(within)
	reader := c.nodes[p].s.token(9, false)
	for {
		var seqs []uint64
		var depths [][]byte
		for _, nd := range c.nodes {
			a := nd.s.replDo("GET", "/api/v1/depth/BTC-USDT", reader, nil)
			if a.status != 200 {
				c.t.Fatalf("node %s depth: %d %s", nd.id, a.status, a.body)
			}
			seqs, depths = append(seqs, a.seq), append(depths, a.body)
		}
		same := seqs[0] != 0
		for i := range seqs {
			same = same && seqs[i] == seqs[0]
		}
		if same {
			for i := range depths {
				if !bytes.Equal(depths[i], depths[p]) {
					c.t.Fatalf("depth at seq %d: node %s %s, primary %s %s", seqs[0], c.nodes[i].id, depths[i], c.nodes[p].id, depths[p])
				}
			}
			ok := true
			for u := uint64(1); u <= fvUsers && ok; u++ {
				pb := c.nodes[p].s.replDo("GET", "/api/v1/balances", c.nodes[p].s.token(u, false), nil)
				for _, nd := range c.nodes {
					b := nd.s.replDo("GET", "/api/v1/balances", nd.s.token(u, false), nil)
					if b.seq != seqs[0] || pb.seq != seqs[0] {
						ok = false // a command came in between: read again
						break
					}
					if b.status != 200 || spotOf(c.t, b.body) != spotOf(c.t, pb.body) {
						c.t.Fatalf("user %d balances at seq %d: node %s %d %s, primary %s %s", u, seqs[0], nd.id, b.status, b.body, c.nodes[p].id, pb.body)
					}
				}
			}
			if ok {
				for i := range c.nodes {
					st, _ := c.status(i)
					if st.Diverged || (i != p && (st.Role != "standby" || st.HashChecks == 0)) || (i == p && st.Role != "primary") {
						c.t.Fatalf("node %s at seq %d: %+v (primary %s)", c.nodes[i].id, seqs[0], st, c.nodes[p].id)
					}
					c.t.Logf("node %s: %s seq %d epoch %d, %d state hashes compared equal", c.nodes[i].id, st.Role, st.Seq, st.Epoch, st.HashChecks)
				}
				return p
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the nodes did not reach one seq within %v: %v", within, seqs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// finish checks the end state with the load stopped: the nodes agree, the
// history holds on the final primary, the publisher and the sink caught up;
// then it stops every node (standbys first) and checks Postgres and the
// event stream against a WAL that starts at seq 1.
func (c *fvCluster) finish(h *fvHistory) {
	c.t.Helper()
	p := c.agree(60 * time.Second)
	ps := c.nodes[p].s
	e2eWaitSink(c.t, ps, c.pg)
	var gaps int64 // ranges a new primary's sink could not derive from its WAL (its checkpoint below the WAL's front)
	var first string
	if err := e2eConn(c.t, c.pg).QueryRow(context.Background(),
		"SELECT count(*), coalesce(min(from_seq || '-' || to_seq || ': ' || reason), '') FROM sink_gaps").Scan(&gaps, &first); err != nil {
		c.t.Fatal(err)
	}
	if gaps != 0 {
		c.t.Errorf("Postgres: %d ranges of commands skipped by a sink after a take-over (sink_gaps), e.g. %s", gaps, first)
	}
	fvCheckHistory(c.t, ps, h)
	deadline := time.Now().Add(30 * time.Second)
	for ps.metric("ubs_publisher_lag_commands") != 0 {
		if time.Now().After(deadline) {
			c.t.Fatalf("the publisher lags %v commands", ps.metric("ubs_publisher_lag_commands"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, nd := range c.nodes {
		if i != p {
			nd.s.Stop()
			nd.s = nil
		}
	}
	ps.Stop()
	c.nodes[p].s = nil
	// Postgres and the stream against a WAL from seq 1: the primary's if
	// it has one (a primary truncates its WAL behind its followers'
	// snapshots: long runs; a bootstrapped node's starts at its snapshot).
	dir := ""
	for _, i := range append([]int{p}, 0, 1, 2) {
		if i < len(c.nodes) && dir == "" && fvFullWAL(c.nodes[i].dir) {
			dir = c.nodes[i].dir
		}
	}
	if dir == "" {
		c.t.Logf("no data dir holds the WAL from seq 1 (truncated behind snapshots): Postgres is checked by sink_gaps and the history, the event stream by its ids' order")
		fvCheckEventOrder(c.t, fvStoredIDs(c.t, c.nats.URL(), c.stream))
		return
	}
	e2eConverged(c.t, dir, c.pg)
	fvCheckEvents(c.t, c.nats.URL(), c.stream, dir)
}

// fvFullWAL says whether dir's WAL starts at seq 1.
func fvFullWAL(dir string) bool {
	rec, err := journal.Recover(journal.RecoverConfig{Dir: dir, ReadOnly: true, IgnoreSnapshots: true})
	if err != nil {
		return false
	}
	rec.WAL.Close()
	return true
}

// fvCheckEventOrder requires the stream's message ids to be valid and
// strictly increasing (seq, then event index): none twice, none out of
// order.
func fvCheckEventOrder(t *testing.T, ids []string) {
	t.Helper()
	var lastSeq core.Seq
	lastIdx := -1
	for i, id := range ids {
		seq, idx, ok := publish.ParseMsgID(id)
		if !ok {
			t.Fatalf("event stream position %d: message id %q", i+1, id)
		}
		if seq < lastSeq || (seq == lastSeq && idx <= lastIdx) {
			t.Fatalf("event stream position %d: message id %s after %d-%d", i+1, id, lastSeq, lastIdx)
		}
		lastSeq, lastIdx = seq, idx
	}
	t.Logf("event stream: %d messages, ids strictly increasing", len(ids))
}

// fvCheckEvents requires the event stream to hold exactly the messages the
// WAL in dir yields (publish.appendMessages' kinds), each once and in
// order: ids "<seq>-<event index>".
func fvCheckEvents(t *testing.T, url, stream, dir string) {
	t.Helper()
	var want []string
	rec, err := journal.Recover(journal.RecoverConfig{Dir: dir, ReadOnly: true, IgnoreSnapshots: true,
		OnCommand: func(c *core.Command, evs []core.Event) {
			for i := range evs {
				switch evs[i].Kind {
				case core.EvP2PTransfer:
					if evs[i].Flags != 0 {
						continue
					}
				case core.EvTrade, core.EvOrderAccepted, core.EvOrderFilled, core.EvOrderPartiallyFilled, core.EvOrderCancelled,
					core.EvOrderExpired, core.EvOrderModified, core.EvOrderRejected, core.EvBalance:
				default:
					continue
				}
				want = append(want, publish.MsgID(c.Seq, i))
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	rec.WAL.Close()
	got := fvStoredIDs(t, url, stream)
	seen := map[string]bool{}
	for i, id := range got {
		if seen[id] {
			t.Fatalf("event stream: message id %s twice (stream position %d)", id, i+1)
		}
		seen[id] = true
	}
	if !slices.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		g, w := got[i:min(len(got), i+5)], want[i:min(len(want), i+5)]
		t.Fatalf("event stream: %d messages, the WAL yields %d; they differ from position %d: stored %v, want %v", len(got), len(want), i+1, g, w)
	}
	t.Logf("event stream: %d messages, each once, in WAL order", len(got))
}

// fvStoredIDs reads the message ids of the whole stream.
func fvStoredIDs(t *testing.T, url, stream string) []string {
	t.Helper()
	js := natstest.JetStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
			if md.Sequence.Stream >= info.State.LastSeq {
				return ids
			}
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("stream %s: read %d messages, up to stream seq %d expected", stream, len(ids), info.State.LastSeq)
		}
	}
}

// fvNATSReady waits until the streams of the log, the lease and the
// snapshot bucket each have a leader and every other replica is online and
// current, and returns the index of the NATS node leading the log (its
// server name is n<index>: natstest). Killing that node then takes one
// replica of three, never a quorum: a node restarted just before may still
// be catching up, and killing the leader then would leave one current
// replica.
func fvNATSReady(t *testing.T, c *natstest.Cluster, within time.Duration) int {
	t.Helper()
	streams := []string{replication.DefaultStream, "KV_" + replication.DefaultLeaseBucket,
		"OBJ_" + replication.SnapshotBucketName(replication.DefaultStream)}
	deadline := time.Now().Add(within)
	for {
		leader, err := func() (int, error) {
			nc, err := nats.Connect(c.URL(), nats.Timeout(2*time.Second))
			if err != nil {
				return -1, err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return -1, err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			leader := -1
			for _, name := range streams {
				s, err := js.Stream(ctx, name)
				if err != nil {
					return -1, fmt.Errorf("%s: %w", name, err)
				}
				info, err := s.Info(ctx)
				if err != nil {
					return -1, fmt.Errorf("%s: %w", name, err)
				}
				if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
					return -1, fmt.Errorf("%s: cluster %+v", name, info.Cluster)
				}
				for _, r := range info.Cluster.Replicas {
					if r.Offline || !r.Current {
						return -1, fmt.Errorf("%s: replica %s offline %v current %v lag %d", name, r.Name, r.Offline, r.Current, r.Lag)
					}
				}
				if name == replication.DefaultStream {
					if leader, err = strconv.Atoi(strings.TrimPrefix(info.Cluster.Leader, "n")); err != nil {
						return -1, fmt.Errorf("leader %q", info.Cluster.Leader)
					}
				}
			}
			return leader, nil
		}()
		if err == nil {
			return leader
		}
		if time.Now().After(deadline) {
			t.Fatalf("the NATS cluster is not whole within %v: %v", within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFailoverEndToEnd: under load, the primary SIGKILLed (a standby takes
// over within 10 s), restarted (a standby again), the new primary paused
// past the lease (another takes over; resumed, it acknowledges nothing and
// rejoins as a standby by itself), a standby's data dir wiped (it
// bootstraps from the snapshot bucket). At the end the three nodes agree,
// every answer the clients got holds, and Postgres and the event stream
// hold every command's rows and events exactly once.
func TestFailoverEndToEnd(t *testing.T) {
	t.Parallel()
	nc := natstest.StartProcs(t, 3)
	pg := pgtest.NewDB(t)
	c := fvStartCluster(t, nc, pg, 3)
	p0 := c.waitPrimary(30 * time.Second)
	e2eFund(t, c.nodes[p0].s, fvUsers)
	h := newFvHistory(t, c.addrs(), fvUsers)
	h.hint.Store(int32(p0))
	h.start(4)
	loadStopped := false
	defer func() {
		if !loadStopped {
			h.stopLoad()
		}
	}()
	c.waitLoad(h, 200, 30*time.Second)
	c.noFlap(p0, 1) // under load, without kills or pauses: the first claim is the only one

	// 1. SIGKILL the primary: another node takes the lease and serves.
	t0 := time.Now()
	c.kill(p0)
	p1, took := c.waitTakeover(h, t0, 30*time.Second, p0)
	t.Logf("primary %s SIGKILLed: first 200 from %s after %v", c.nodes[p0].id, c.nodes[p1].id, took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("failover after SIGKILL took %v (> 10 s)", took)
	}
	if p := c.waitPrimary(10 * time.Second); p != p1 {
		t.Fatalf("node %s answered 200, node %s says it is the primary", c.nodes[p1].id, c.nodes[p].id)
	}
	c.waitLog(p1, fvServingLine, 2, 10*time.Second)

	// 2. The killed node restarts with the same flags and data dir: a standby.
	c.restart(p0)
	c.waitStandby(p0, p1, c.seqOf(p1), 60*time.Second)
	t.Logf("node %s restarted: a standby (discarded an unreplicated WAL tail: %v)", c.nodes[p0].id,
		strings.Contains(c.nodes[p0].s.Logs(), "replication: discarding"))
	c.waitLoad(h, 100, 30*time.Second)

	// 3. SIGSTOP the primary for 3 TTLs: another takes over; SIGCONT: it
	// acknowledges nothing more and rejoins as a standby.
	tStop := time.Now()
	c.signal(p1, syscall.SIGSTOP)
	p2, took, ok := c.takeover(h, tStop, 15*time.Second, p1) // normally within the pause of 3 TTLs
	if !ok {
		c.dumpStacks()
		t.Fatalf("primary %s paused: no other node answered 200 within %v", c.nodes[p1].id, time.Since(tStop).Round(time.Millisecond))
	}
	t.Logf("primary %s SIGSTOPped: first 200 from %s after %v", c.nodes[p1].id, c.nodes[p2].id, took.Round(time.Millisecond))
	if d := time.Until(tStop.Add(3 * fvTTL)); d > 0 {
		time.Sleep(d) // the pause lasts 3 TTLs (its length is the point, not a wait for a condition)
	}
	tCont := time.Now()
	c.signal(p1, syscall.SIGCONT)
	for i := 0; i < 3; i++ {
		if pr := h.probe(p1); pr.class == fvOK {
			t.Fatalf("the paused old primary acknowledged after SIGCONT: %s", &pr)
		}
	}
	c.waitLog(p1, "replication: rejoining as a standby", 1, 30*time.Second)
	if p := c.waitPrimary(30 * time.Second); p != p2 {
		t.Fatalf("node %s answered 200 after the pause, node %s says it is the primary", c.nodes[p2].id, c.nodes[p].id)
	}
	c.waitStandby(p1, p2, c.seqOf(p2), 60*time.Second)
	if oks := h.okFrom(p1, tCont); len(oks) > 0 {
		t.Fatalf("the old primary acknowledged %d ops after SIGCONT, first: %s", len(oks), &oks[0])
	}
	if pr := h.probe(p1); pr.class == fvOK || pr.code != "NOT_PRIMARY" {
		t.Fatalf("a write on the rejoined standby: %s", &pr)
	}

	// 4. Wipe a standby's data dir: it bootstraps from the newest snapshot
	// in the bucket and catches up.
	deadline := time.Now().Add(30 * time.Second)
	for c.seqOf(p2) < 1200 { // at least two snapshots (every 500 commands) taken
		if time.Now().After(deadline) {
			t.Fatalf("primary at seq %d only", c.seqOf(p2))
		}
		time.Sleep(50 * time.Millisecond)
	}
	w := p0
	if w == p2 {
		w = p1
	}
	c.kill(w)
	if err := os.RemoveAll(c.nodes[w].dir); err != nil {
		t.Fatal(err)
	}
	c.nodes[w].wiped = true
	c.restart(w)
	c.waitLog(w, "replication: bootstrapping", 1, 10*time.Second)
	c.waitStandby(w, p2, c.seqOf(p2), 60*time.Second)
	c.waitLoad(h, 250, 30*time.Second) // past a multiple of 200: every standby compares a state hash (agree)

	h.stopLoad()
	loadStopped = true
	c.finish(h)
}

// fvEnvInt is env name as an int, def if unset.
func fvEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// fvDurations is the median and max of ds.
func fvDurations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("n=%d median %v max %v", len(s), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

// TestFailoverKillLoop (test-long): random actions under load: the
// primary SIGKILLed and restarted; the primary SIGSTOPped past the lease
// and resumed; a standby SIGKILLed and restarted; the primary's exchange
// SIGKILLed together with the NATS node leading the log's stream, both
// restarted. The failover time (kill -> first 200 on a new primary) is
// collected for UBS_FAILOVER_KILLS (20) kills of each kind, over at least
// UBS_FAILOVER_ACTIONS (50) actions; the history is checked at the end.
// UBS_FAILOVER_SEED replays an order of actions.
func TestFailoverKillLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("test-long: many fail-overs")
	}
	kills := fvEnvInt(t, "UBS_FAILOVER_KILLS", 20)
	actions := fvEnvInt(t, "UBS_FAILOVER_ACTIONS", 50)
	seed := uint64(fvEnvInt(t, "UBS_FAILOVER_SEED", int(time.Now().UnixNano()%1e6)))
	t.Logf("UBS_FAILOVER_SEED=%d UBS_FAILOVER_KILLS=%d UBS_FAILOVER_ACTIONS=%d", seed, kills, actions)
	r := rand.New(rand.NewPCG(seed, 38))

	nc := natstest.StartProcs(t, 3)
	pg := pgtest.NewDB(t)
	c := fvStartCluster(t, nc, pg, 3)
	p := c.waitPrimary(30 * time.Second)
	e2eFund(t, c.nodes[p].s, fvUsers)
	h := newFvHistory(t, c.addrs(), fvUsers)
	h.hint.Store(int32(p))
	h.start(4)
	loadStopped := false
	defer func() {
		if !loadStopped {
			h.stopLoad()
		}
	}()
	c.waitLoad(h, 100, 30*time.Second)
	// No flapping: under load, without kills or pauses, the lease stays
	// with the first primary for UBS_FAILOVER_STEADY seconds (60).
	steady := time.Duration(fvEnvInt(t, "UBS_FAILOVER_STEADY", 60)) * time.Second
	time.Sleep(steady)
	c.noFlap(p, 1)
	t.Logf("steady run of %v under load: one primary, epoch 1, no failover", steady)

	var survives, dies []time.Duration // failover times: the stream leader survives / dies with the primary
	var paused []time.Duration
	for n := 0; n < actions || len(survives) < kills || len(dies) < kills; n++ {
		p = c.waitPrimary(60 * time.Second)
		leader := fvNATSReady(t, nc, 60*time.Second)
		var kind string
		switch x := r.IntN(10); {
		case x < 3 && len(survives) < kills || x < 1:
			kind = "kill-primary"
		case x < 6 && len(dies) < kills || x < 2:
			kind = "kill-primary+leader"
		case x < 8:
			kind = "pause-primary"
		default:
			kind = "kill-standby"
		}
		before := c.seqOf(p)
		t0 := time.Now()
		switch kind {
		case "kill-primary", "kill-primary+leader":
			c.kill(p)
			if kind == "kill-primary+leader" {
				nc.StopNode(leader)
			}
			np, took := c.waitTakeover(h, t0, 90*time.Second, p)
			if kind == "kill-primary" {
				survives = append(survives, took)
			} else {
				dies = append(dies, took)
			}
			t.Logf("action %d: %s %s (NATS leader n%d): first 200 from %s after %v", n, kind, c.nodes[p].id, leader, c.nodes[np].id, took.Round(time.Millisecond))
			if kind == "kill-primary+leader" {
				if err := nc.StartNode(leader); err != nil {
					t.Fatal(err)
				}
				if err := nc.WaitReady(60 * time.Second); err != nil {
					t.Fatal(err)
				}
			}
			c.restart(p)
			c.waitStandby(p, c.waitPrimary(60*time.Second), before, 90*time.Second)
		case "pause-primary":
			c.signal(p, syscall.SIGSTOP)
			np, took, ok := c.takeover(h, t0, 30*time.Second, p)
			if !ok {
				c.dumpStacks()
				t.Fatalf("action %d: primary %s paused: no other node answered 200 within %v", n, c.nodes[p].id, time.Since(t0).Round(time.Millisecond))
			}
			paused = append(paused, took)
			if d := time.Until(t0.Add(3 * fvTTL)); d > 0 {
				time.Sleep(d) // the pause's length is the point
			}
			tCont := time.Now()
			c.signal(p, syscall.SIGCONT)
			t.Logf("action %d: pause-primary %s: first 200 from %s after %v", n, c.nodes[p].id, c.nodes[np].id, took.Round(time.Millisecond))
			c.waitStandby(p, c.waitPrimary(60*time.Second), before, 90*time.Second)
			if oks := h.okFrom(p, tCont); len(oks) > 0 {
				t.Fatalf("action %d: the old primary acknowledged %d ops after SIGCONT, first: %s", n, len(oks), &oks[0])
			}
		case "kill-standby":
			s := (p + 1 + r.IntN(len(c.nodes)-1)) % len(c.nodes)
			c.kill(s)
			c.restart(s)
			t.Logf("action %d: kill-standby %s", n, c.nodes[s].id)
			c.waitStandby(s, c.waitPrimary(60*time.Second), before, 90*time.Second)
		}
		c.waitLoad(h, 20, 60*time.Second)
	}
	c.waitLoad(h, 250, 60*time.Second) // past a multiple of 200: every standby compares a state hash (agree)
	h.stopLoad()
	loadStopped = true
	t.Logf("failover (SIGKILL -> first 200), the log's stream leader survives: %s", fvDurations(survives))
	t.Logf("failover (SIGKILL -> first 200), the stream leader dies with the primary: %s", fvDurations(dies))
	t.Logf("take-over of a paused primary (SIGSTOP -> first 200): %s", fvDurations(paused))
	c.finish(h)
}
