package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/replication/natstest"
)

// replAnswer is one answer with the replication headers.
type replAnswer struct {
	status  int
	body    []byte
	seq     uint64 // X-Ubs-Seq
	primary string // X-Ubs-Primary
	code    string // the error code, if any
}

func (s *e2eServer) replDo(method, path, token string, body any) replAnswer {
	s.t.Helper()
	a, err := s.replTry(method, path, token, body)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

// replTry is replDo that returns a transport error (a timeout) instead of
// failing the test.
func (s *e2eServer) replTry(method, path, token string, body any) (replAnswer, error) {
	resp, b, err := s.send(method, path, token, body)
	if err != nil {
		return replAnswer{}, err
	}
	a := replAnswer{status: resp.StatusCode, body: b, primary: resp.Header.Get("X-Ubs-Primary")}
	a.seq, _ = strconv.ParseUint(resp.Header.Get("X-Ubs-Seq"), 10, 64)
	var e struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(b, &e) == nil {
		a.code = e.Code
	}
	return a, nil
}

// spotOf is the SPOT part of a GET /api/v1/balances answer, as text.
func spotOf(t *testing.T, body []byte) string {
	t.Helper()
	var v struct {
		Balances []struct {
			Asset string          `json:"asset"`
			Spot  json.RawMessage `json:"spot"`
		} `json:"balances"`
	}
	if err := json.Unmarshal(body, &v); err != nil || len(v.Balances) == 0 {
		t.Fatalf("balances %s: %v", body, err)
	}
	var out []byte
	for _, b := range v.Balances {
		out = append(append(append(out, b.Asset...), b.Spot...), ';')
	}
	return string(out)
}

// replOrder is a small resting buy of user 1.
func replOrder(s *e2eServer) replAnswer {
	s.t.Helper()
	a, err := replTryOrder(s)
	if err != nil {
		s.t.Fatal(err)
	}
	return a
}

func replTryOrder(s *e2eServer) (replAnswer, error) {
	return s.replTry("POST", "/api/v1/order", s.token(1, false), map[string]any{"market": "BTC-USDT", "side": "BUY",
		"type": "LIMIT", "time_in_force": "GTC", "price": "40000", "quantity": "0.0001"})
}

// replUntil sends orders to s until one answers want (a timed-out request
// counts as not yet), for up to d; it returns the answers' codes seen.
func replUntil(t *testing.T, s *e2eServer, d time.Duration, want func(replAnswer) bool) []string {
	t.Helper()
	var seen []string
	deadline := time.Now().Add(d)
	for {
		a, err := replTryOrder(s)
		if err == nil && want(a) {
			return seen
		}
		if err != nil {
			seen = append(seen, "timeout")
		} else {
			seen = append(seen, strconv.Itoa(a.status)+" "+a.code)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no wanted answer within %v: %v", d, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplicationEndToEnd: two exchanges on a 3-node NATS cluster of real
// nats-server processes (R=3, sync). The standby applies everything the primary acknowledges under
// load and serves the same reads at the same seq; it refuses writes with
// 503 NOT_PRIMARY naming the primary. One NATS node SIGKILLed: the primary
// goes on; two: writes answer 503 REPLICATION_UNAVAILABLE while reads go
// on, and resume once a quorum is back. The primary is paused (SIGSTOP),
// the standby promoted, the old primary resumed (SIGCONT): its next append
// is refused and it acknowledges nothing more, while the new primary holds
// every acknowledged order and takes writes.
func TestReplicationEndToEnd(t *testing.T) {
	t.Parallel()
	c := natstest.StartProcs(t, 3) // real nats-server processes: a node is killed with SIGKILL
	repl := func(id string, extra ...string) []string {
		return append([]string{"--replication", "sync", "--replication-url", c.URL(), "--replication-replicas", "3",
			"--replication-hash-every", "200", "--node-id", id}, extra...)
	}
	pg := pgtest.NewDB(t) // one read model: the primary's sink, then the promoted node's
	bDir := t.TempDir()
	a := e2eStart(t, t.TempDir(), pg, repl("a")...)
	b := e2eStart(t, bDir, pg, repl("b", "--role", "standby")...)

	e2eFund(t, a, 8)
	stop := make(chan struct{})
	done := make(chan map[uint64]ackedOrder)
	go func() { done <- e2eLoad(t, a, 4, 8, stop) }()
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	acked := <-done
	if len(acked) < 50 {
		t.Fatalf("only %d orders acknowledged under load", len(acked))
	}

	// The standby reaches the primary's seq and answers the same reads.
	admin, reader := a.token(1000, true), a.token(9, false)
	pa := a.replDo("GET", "/api/v1/depth/BTC-USDT", reader, nil)
	deadline := time.Now().Add(30 * time.Second)
	var pb replAnswer
	for pb = b.replDo("GET", "/api/v1/depth/BTC-USDT", reader, nil); pb.seq < pa.seq; pb = b.replDo("GET", "/api/v1/depth/BTC-USDT", reader, nil) {
		if time.Now().After(deadline) {
			t.Fatalf("standby at seq %d, primary at %d", pb.seq, pa.seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pa.seq == 0 || pb.seq != pa.seq || !bytes.Equal(pa.body, pb.body) {
		t.Fatalf("depth: primary seq %d %s\nstandby seq %d %s", pa.seq, pa.body, pb.seq, pb.body)
	}
	for u := uint64(1); u <= 8; u++ {
		ba, bb := a.replDo("GET", "/api/v1/balances", a.token(u, false), nil), b.replDo("GET", "/api/v1/balances", b.token(u, false), nil)
		if ba.status != 200 || bb.status != 200 || spotOf(t, ba.body) != spotOf(t, bb.body) || // FUNDING: the primary's Postgres only
			!bytes.Contains(bb.body, []byte(`"funding_error":"NOT_PRIMARY"`)) || bytes.Contains(ba.body, []byte(`funding_error`)) {
			t.Fatalf("user %d balances: primary %d %s, standby %d %s", u, ba.status, ba.body, bb.status, bb.body)
		}
	}
	var status struct {
		Role       string `json:"role"`
		Primary    string `json:"primary"`
		HashChecks int    `json:"hash_checks"`
		Diverged   bool   `json:"diverged"`
	}
	deadline = time.Now().Add(30 * time.Second)
	for { // the primary's state hashes (every 200 commands) equal the standby's at the same seqs
		st := b.replDo("GET", "/admin/v1/replication", admin, nil)
		if st.status != 200 || json.Unmarshal(st.body, &status) != nil || status.Role != "standby" ||
			status.Primary != "a@"+a.addr || status.Diverged {
			t.Fatalf("standby status: %d %s", st.status, st.body)
		}
		if status.HashChecks*200 >= int(pa.seq)-400 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby compared %d state hashes up to seq %d", status.HashChecks, pa.seq)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if w := replOrder(b); w.status != 503 || w.code != "NOT_PRIMARY" || w.primary != a.addr {
		t.Fatalf("write on the standby: %d %s (primary header %q)", w.status, w.body, w.primary)
	}

	// One NATS node down: the service goes on (after the stream elects a
	// new leader if that node led it). Two: writes stop with 503, reads go
	// on; a quorum back: writes resume.
	c.StopNode(2)
	t0 := time.Now()
	seen := replUntil(t, a, 45*time.Second, func(w replAnswer) bool { return w.status == 200 })
	t.Logf("one NATS node down: writes through after %v (%v)", time.Since(t0).Round(time.Millisecond), seen)
	c.StopNode(1)
	replUntil(t, a, 45*time.Second, func(w replAnswer) bool {
		if w.status == 200 {
			t.Fatalf("two NATS nodes down: a write was acknowledged: %s", w.body)
		}
		return w.status == 503 && w.code == "REPLICATION_UNAVAILABLE"
	})
	if r := b.replDo("GET", "/api/v1/depth/BTC-USDT", reader, nil); r.status != 200 {
		t.Fatalf("reads on the standby without a quorum: %d %s", r.status, r.body)
	}
	if r := a.replDo("GET", "/api/v1/depth/BTC-USDT", reader, nil); r.status != 503 || r.code != "REPLICATION_UNAVAILABLE" {
		t.Fatalf("a read on the primary without a quorum: %d %s (want 503 at once: it would wait for the log)", r.status, r.body)
	}
	// One node back: a quorum again, writes resume.
	if err := c.StartNode(1); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	replUntil(t, a, 60*time.Second, func(w replAnswer) bool { return w.status == 200 })
	t.Logf("a quorum back: writes through after %v", time.Since(t0).Round(time.Millisecond))
	if err := c.StartNode(2); err != nil {
		t.Fatal(err)
	}
	replUntil(t, a, 60*time.Second, func(w replAnswer) bool { return w.status == 200 }) // the cluster whole again

	// Pause the primary (its sink caught up), promote the standby, resume
	// the old primary.
	e2eWaitSink(t, a, pg)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b.client.Timeout = 60 * time.Second // a promotion reads the log to its end and claims it (a stream leader election may come first)
	p := b.replDo("POST", "/admin/v1/replication/promote", admin, nil)
	b.client.Timeout = 10 * time.Second
	if p.status != 200 {
		_ = a.cmd.Process.Signal(syscall.SIGCONT)
		t.Fatalf("promote: %d %s", p.status, p.body)
	}
	deadline = time.Now().Add(60 * time.Second) // it serves again, as the primary
	for strings.Count(b.Logs(), `"msg":"exchange: serving"`) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the promoted node did not serve again:\n%s", b.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.waitReady(60 * time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	e2eCheckAcked(t, b, acked)
	if w := replOrder(b); w.status != 200 {
		t.Fatalf("the new primary refused a write: %d %s", w.status, w.body)
	}
	var codes []string
	for i := 0; i < 3; i++ {
		w := replOrder(a)
		if w.status == 200 {
			t.Fatalf("the old primary acknowledged a write after the promotion: %s", w.body)
		}
		codes = append(codes, w.code)
	}
	if codes[len(codes)-1] != "NOT_PRIMARY" {
		t.Fatalf("the old primary's answers after the promotion: %v, want NOT_PRIMARY at last", codes)
	}
	b.Stop()
	a.Stop()
	// The promoted node's sink went on from the old primary's checkpoint in
	// the same database (one venue identity): Postgres equals the new
	// primary's WAL, every command once.
	e2eConverged(t, bDir, pg)
}
