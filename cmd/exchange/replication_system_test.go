package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// replStatus is GET /admin/v1/replication's answer.
type replStatus struct {
	Role       string `json:"role"`
	Epoch      uint64 `json:"epoch"`
	Fenced     bool   `json:"fenced"`
	Seq        uint64 `json:"seq"`
	HashChecks uint64 `json:"hash_checks"`
	Diverged   bool   `json:"diverged"`
	Primary    string `json:"primary"`    // the writer's name@address, from its epoch marker
	Failover   string `json:"failover"`   // manual or auto
	LeaseHeld  bool   `json:"lease_held"` // auto: the node holds the primary's lease
}

// replicationStatus reads s's replication status.
func replicationStatus(t *testing.T, s *e2eServer) replStatus {
	t.Helper()
	a := s.replDo("GET", "/admin/v1/replication", s.token(1000, true), nil)
	var st replStatus
	if a.status != 200 || json.Unmarshal(a.body, &st) != nil {
		t.Fatalf("replication status: %d %s", a.status, a.body)
	}
	return st
}

// replicationStatusTry reads s's replication status, or says why not (the
// process gone, or between two of its serve loops).
func replicationStatusTry(s *e2eServer) (replStatus, error) {
	var st replStatus
	a, err := s.replTry("GET", "/admin/v1/replication", s.token(1000, true), nil)
	switch {
	case err != nil:
		return st, err
	case a.status != 200:
		return st, fmt.Errorf("replication status: %d %s", a.status, a.body)
	}
	return st, json.Unmarshal(a.body, &st)
}

// systemReplication gives the flags of sync replication on the machine's
// NATS (UBS_NATS_URL or 127.0.0.1:4222, a single JetStream node: R=1), on
// a stream of the test's own, deleted at its end; the node names itself
// with --node-id. ok is false without a NATS server (fatal under CI).
func systemReplication(t *testing.T, name string) (flags func(node string) []string, ok bool) {
	t.Helper()
	url := os.Getenv("UBS_NATS_URL")
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("NATS: %v", err)
		}
		t.Logf("NATS at %s: %v: no replication", url, err)
		return nil, false
	}
	stream := fmt.Sprintf("UBS_%s_%d_%d", strings.ToUpper(name), os.Getpid(), time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		if js, err := jetstream.New(nc); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = js.DeleteStream(ctx, stream)
			cancel()
		}
		nc.Close()
	})
	return func(node string) []string {
		return []string{"--replication", "sync", "--replication-url", url, "--replication-stream", stream,
			"--replication-subject", "ubsrepl." + stream, "--replication-replicas", "1",
			"--replication-hash-every", "200", "--node-id", node}
	}, true
}
