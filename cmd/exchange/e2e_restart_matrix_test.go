package main

// The restart matrix (issue 32, item 3), against the real binary with
// Postgres and anvil. One venue holds every kind of state the API can
// create: spot orders resting in two markets on both sides (partly filled,
// modified; beside them a cancelled one, an ended IOC, refused ones), a
// manually halted market, a binary market RESOLVED part-way through its
// settlement, spec 003 transfers on hold (beside a cancelled and a refused
// one), a withdrawal in flight on chain, an internal SPOT->FUNDING transfer
// stuck before its FUNDING deposit, a FROZEN SPOT account, a DISABLED FUNDING
// account, and the core halted by an injected fault.
//
// It is stopped by SIGKILL, then by SIGTERM. After each start: ready within
// 5 s of the process start; the state hash recovered ("journal: recovered")
// equals an offline replay of the data dir and, after the SIGTERM, the hash
// the stopping process logged ("exchange: stopped"); every answer the
// clients read before reads back the same; every operation they were told
// succeeded is there, none they were told failed is; health/matching and
// ubs_markets list every market with its status; money is conserved; a
// client retrying with its key gets the same transfer and withdrawal back
// (and 503 CORE_HALTED for an order or a spec 003 transfer).
//
// Then the venue works on: the withdrawal completes on chain, the transfer
// commits, the repaired core resumes, the retried order and spec 003
// transfer are the same ones, the settlement finishes, the halted market
// resumes, the frozen and disabled accounts still refuse, every resting
// order cancels with its fills, and Postgres converges to the WAL.

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
)

// maxReady is how long a start may take, process start to /health/ready 200.
const maxReady = 5 * time.Second

func TestRestartMatrix(t *testing.T) {
	t.Parallel() // waits on servers, Postgres and anvil more than it computes
	e2eBinary(t) // shared by the package's tests: not the matrix's own time
	began := time.Now()
	v := rmBuild(t)
	t.Logf("venue built in %v (seq %v)", time.Since(began).Round(time.Millisecond), v.s.metric("ubs_durable_seq"))
	rmWaitForgotten(v)
	for _, leg := range []string{"SIGKILL", "SIGTERM"} {
		stopHash, epoch := "", v.epoch
		if leg == "SIGKILL" {
			v.s.Kill()
		} else {
			v.s.stopWith(syscall.SIGTERM)
			stopHash = rmLogHash(t, v.s.Logs(), "exchange: stopped")
		}
		offline := rmOfflineHash(t, v.dir)
		ready := v.start()
		recovered := rmLogHash(t, v.s.Logs(), "journal: recovered")
		t.Logf("%s: ready %v after the process start; state hash stopped %q, offline %s, recovered %s",
			leg, ready.Round(time.Millisecond), stopHash, offline, recovered)
		if ready > maxReady {
			t.Errorf("%s: ready %v after the process start, want <= %v", leg, ready, maxReady)
		}
		if recovered != offline || (leg == "SIGTERM" && stopHash != recovered) {
			t.Errorf("%s: state hash logged at the stop %q, computed offline %s, recovered at the start %s: want all equal",
				leg, stopHash, offline, recovered)
		}
		if v.replicated { // the restarted node claimed the log again, as the primary
			st := replicationStatus(t, v.s)
			if st.Role != "primary" || st.Fenced || st.Epoch <= epoch || st.Seq < uint64(v.s.metric("ubs_durable_seq")) {
				t.Errorf("%s: replication status %+v after the restart (epoch before %d, durable seq %v)", leg, st, epoch, v.s.metric("ubs_durable_seq"))
			}
			t.Logf("%s: the replicated primary claimed the log again: epoch %d -> %d, log at command %d", leg, epoch, st.Epoch, st.Seq)
		}
		v.check(leg)
	}
	v.finish()
	v.workOn()
	v.s.Stop()
	e2eConverged(t, v.dir, v.pg)
	t.Logf("matrix done in %v", time.Since(began).Round(time.Millisecond))
}

// rmLogHash is the state_hash of the log records with message msg; every
// such record of the process must carry the same one.
func rmLogHash(t *testing.T, logs, msg string) string {
	t.Helper()
	hash := ""
	for _, line := range strings.Split(logs, "\n") {
		var rec map[string]any
		if !strings.Contains(line, msg) || json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}
		h, _ := rec["state_hash"].(string)
		if h == "" || (hash != "" && h != hash) {
			t.Fatalf("log record %q with state hash %q (earlier %q)", msg, h, hash)
		}
		hash = h
	}
	if hash == "" {
		t.Fatalf("no log record %q with a state hash:\n%s", msg, logs)
	}
	return hash
}

// rmOfflineHash recovers the stopped venue's data dir read-only, as
// `replay` does, and returns the state hash it reaches.
func rmOfflineHash(t *testing.T, dir string) string {
	t.Helper()
	rec, err := journal.Recover(journal.RecoverConfig{Dir: dir, ReadOnly: true, Logger: quietLogger(),
		Core: core.Config{AllowFaults: true}})
	if err != nil {
		t.Fatalf("offline recovery: %v", err)
	}
	defer rec.WAL.Close()
	return rec.StateHash
}

// rmVenue is the matrix's venue and everything its clients were told.
type rmVenue struct {
	t     *testing.T
	s     *e2eServer
	dir   string
	pg    string
	flags []string
	// replicated: the venue runs as a replicated primary (sync, R=1 on
	// the machine's NATS); epoch is its claim's epoch at the last start.
	replicated bool
	epoch      uint64
	node       *anviltest.Node
	admin      string

	orders  map[uint64]rmOrder // every order answered 200: id -> what the last answer said
	refused []rmRefused        // orders answered with an error: they must not exist
	want    map[string]any     // every stable answer read before the first stop

	retryOrder uint64              // the order rmRetryOrder placed
	retryP2P   string              // the transfer rmRetryP2P created
	p2pPages   map[string]any      // handle -> its first history page, read right after the cancel
	p2pUsers   []string            // spec 003 handles
	p2pTold    map[string]string   // transferId -> status told (PENDING, CANCELLED)
	p2pBalance map[string][3]int64 // handle -> balance, available, held (cents)

	xUser       uint64          // the internal-transfer user
	xCommitted  string          // req_id answered 200 COMMITTED
	xPending    string          // req_id answered 202 rmPendingState (its FUNDING side fails)
	xTrigger    string          // the Postgres function failing it
	wUser       uint64          // the withdrawing user
	wID         string          // withdrawal answered 202 PENDING, in flight on chain
	wTo         chaintx.Address // its address
	coreHalted  string          // the open core breaker's reason
	haltedSpot  string          // the manually halted spot market
	binary      int             // the binary market part-way through its settlement
	binaryState string          // its status (RESOLVED, settling)
}

// rmOrder is what a client was told about an order.
type rmOrder struct {
	user   uint64
	status string
	filled int64 // units of the market's base (8 decimals) or shares
}

// rmRefused is an order refused with an error answer.
type rmRefused struct {
	user   uint64
	cid    string
	status int
	code   string
}

// start launches the server on the venue's data dir and database and
// returns the time from the process start to /health/ready answering 200.
func (v *rmVenue) start() time.Duration {
	v.t.Helper()
	t0 := time.Now()
	v.s = e2eLaunch(v.t, v.dir, v.pg, v.flags...)
	v.s.waitReady(60 * time.Second)
	d := time.Since(t0)
	v.admin = v.s.token(1000, true)
	if v.replicated {
		v.epoch = replicationStatus(v.t, v.s).Epoch
	}
	return d
}

// ok sends a request that must answer want (200 if 0) and returns the body.
func (v *rmVenue) ok(want int, method, path string, user uint64, body any) map[string]any {
	v.t.Helper()
	if want == 0 {
		want = 200
	}
	st, out := v.s.do(method, path, v.s.token(user, user == 1000), body)
	if st != want {
		v.t.Fatalf("%s %s %v: %d %v, want %d", method, path, body, st, out, want)
	}
	return out
}

// rmAnvil starts anvil with automine off and writes the hot wallet's key;
// it returns the node and the --chain-* flags.
func rmAnvil(t *testing.T) (*anviltest.Node, []string) {
	node := anviltest.StartT(t)
	key, _ := node.NewKey(t)
	keyFile := hotKeyFile(t, key)
	if err := node.Automine(false); err != nil {
		t.Fatal(err)
	}
	// A fixed node id: the restarted process renews its own lease at once
	// instead of waiting for the killed one's to expire.
	return node, []string{"--chain-rpc", node.URL, "--chain-key-file", keyFile, "--chain-finality", "2",
		"--chain-resubmit-interval", "1s", "--chain-node-id", "restart-matrix"}
}

// poll calls f every 50 ms until it returns true, failing with what after d.
func (v *rmVenue) poll(what string, d time.Duration, f func() bool) {
	v.t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			v.t.Fatalf("not %s after %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rmWaitForgotten waits until the core has forgotten the cancelled spec
// 003 transfer (--p2p-retention 2s; the two on hold stay): the restarts and
// their checks then meet the boundary between the core and Postgres.
func rmWaitForgotten(v *rmVenue) {
	v.t.Helper()
	pending := 0
	for _, st := range v.p2pTold {
		if st == "PENDING" {
			pending++
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for v.s.metric("ubs_p2p_retained") != float64(pending) {
		if time.Now().After(deadline) {
			v.t.Fatalf("the core retains %v spec 003 transfers 20 s on, want the %d on hold (the cancelled one forgotten)",
				v.s.metric("ubs_p2p_retained"), pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
