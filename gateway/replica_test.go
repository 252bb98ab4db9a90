package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/persist/chaintx"
)

// fakeReplica is a node of a replicated venue whose state a test sets.
type fakeReplica struct {
	primary, accepting atomic.Bool
	promoteErr         error
	promoted           atomic.Bool
}

func (r *fakeReplica) Primary() bool       { return r.primary.Load() }
func (r *fakeReplica) Accepting() bool     { return r.accepting.Load() }
func (r *fakeReplica) PrimaryAddr() string { return "10.0.0.1:8080" }
func (r *fakeReplica) Seq() uint64         { return 42 }
func (r *fakeReplica) Promote(context.Context) (uint64, error) {
	if r.promoteErr != nil {
		return 0, r.promoteErr
	}
	r.promoted.Store(true)
	return 7, nil
}
func (r *fakeReplica) ReplicationStatus() any {
	return map[string]any{"role": "standby", "mode": "sync", "epoch": 6, "fenced": false, "stream_seq": 9, "seq": 42,
		"lag_commands": 0, "lag_seconds": 0, "primary": "a@10.0.0.1:8080", "diverged": false, "hash_checks": 3, "failover": "manual", "lease_held": false}
}

// TestReplicaAnswers: a standby serves reads (with X-Ubs-Seq) and answers
// writes 503 NOT_PRIMARY naming the primary; a primary without a quorum
// answers 503 REPLICATION_UNAVAILABLE except health and replication; the
// replication routes answer per the document; without a Replica they do
// not exist.
func TestReplicaAnswers(t *testing.T) {
	rep := &fakeReplica{}
	h := newHarness(t, func(c *ServerConfig) { c.Replica = rep })
	user := h.token(1)
	st, _ := h.raw("GET", "/api/v1/balances", user, "")
	if st != 200 {
		t.Fatalf("a read on the standby: %d", st)
	}
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/api/v1/order")
	req.Header.Set("Authorization", "Bearer "+user)
	req.SetBodyString(orderBody())
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	h.h(&ctx)
	if ctx.Response.StatusCode() != 503 || !strings.Contains(string(ctx.Response.Body()), CodeNotPrimary) ||
		string(ctx.Response.Header.Peek("X-Ubs-Primary")) != "10.0.0.1:8080" || string(ctx.Response.Header.Peek("X-Ubs-Seq")) != "42" {
		t.Fatalf("a write on the standby: %d %s %v", ctx.Response.StatusCode(), ctx.Response.Body(), ctx.Response.Header.String())
	}
	h.fails("POST", "/api/v1/order", user, orderBody(), 503, CodeNotPrimary)
	h.fails("POST", "/admin/v1/adjust", h.admin, `{"user_id":1,"asset":"BTC","amount":"1","ref":"r"}`, 503, CodeNotPrimary)
	// A write of a feature the standby does not run (Postgres's): the
	// primary serves it, so NOT_PRIMARY, not 404; a path no node serves
	// stays 404.
	h.fails("POST", "/admin/v1/deposit", h.admin, `{"user_id":1,"asset":"BTC","amount":"1","tx_ref":"r"}`, 503, CodeNotPrimary)
	h.fails("POST", "/admin/v1/no-such-thing", h.admin, `{}`, 404, CodeNotFound)
	h.ok("GET", "/admin/v1/replication", h.admin, "")

	rep.promoteErr = errors.New("no quorum")
	h.fails("POST", promotePath, h.admin, "", 503, CodeReplicationUnavailable)
	rep.promoteErr = nil
	if out := h.ok("POST", promotePath, h.admin, ""); out["role"] != "primary" || rep.promoted.Load() != true {
		t.Fatalf("promote: %v", out)
	}
	rep.primary.Store(true)
	h.fails("POST", promotePath, h.admin, "", http.StatusConflict, CodeAlreadyPrimary)

	// The primary, its log without a quorum: everything but health and
	// replication answers 503 at once; with it, writes go through.
	h.fails("GET", "/api/v1/balances", user, "", 503, CodeReplicationUnavailable)
	h.fails("POST", "/api/v1/order", user, orderBody(), 503, CodeReplicationUnavailable)
	if st, _ := h.raw("GET", "/health/live", "", ""); st != 200 {
		t.Fatalf("health without a quorum: %d", st)
	}
	h.ok("GET", "/admin/v1/replication", h.admin, "")
	rep.accepting.Store(true)
	h.fund(1, "USDT", "100000")
	h.ok("POST", "/api/v1/order", user, orderBody())

	// Every route of a node with every feature: refused before its handler.
	every := func(c *ServerConfig) {
		c.Replica, c.Transfers, c.Faults, c.CoreFaults = rep, newFakeTransfers(), &fakeFaults{}, true
		c.Chain = &ChainConfig{Withdrawals: &fakeWithdrawals{}, Tx: moneyTx{},
			Checksum: func(a chaintx.Address) string { return string(a) }}
		c.P2P = &P2PConfig{Asset: 3, Scale: 2, Hold: p2pHold}
	}
	for _, standby := range []bool{true, false} {
		rep.primary.Store(!standby)
		rep.accepting.Store(false)
		all := newHarness(t, every)
		for _, r := range routes {
			path := "/" + strings.ReplaceAll(strings.Join(r.segs, "/"), "{}", "1")
			if hasSegPrefix([]byte(path), "/health") || hasSegPrefix([]byte(path), "/metrics") ||
				hasSegPrefix([]byte(path), "/admin/v1/replication") || path == "/openapi.json" ||
				(standby && !writes([]byte(r.method))) {
				continue
			}
			tok := all.token(1)
			if accessOf([]byte(path)) == accessAdmin {
				tok = all.admin
			}
			want := CodeReplicationUnavailable
			if standby {
				want = CodeNotPrimary
			}
			body := ""
			if writes([]byte(r.method)) {
				body = "{}"
			}
			if isP2PPath([]byte(path)) { // spec 003's own error body
				if st, out := all.do(r.method, path, tok, body); st != 503 || out["code"] != want {
					t.Fatalf("%s %s: %d %v, want 503 %s", r.method, path, st, out, want)
				}
				continue
			}
			all.fails(r.method, path, tok, body, 503, want)
		}
	}

	plain := newHarness(t)
	plain.fails("GET", "/admin/v1/replication", plain.admin, "", 404, CodeNotFound)
	plain.fails("POST", promotePath, plain.admin, "", 404, CodeNotFound)
}
