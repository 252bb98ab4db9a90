package gateway

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// Codes of a replicated venue (docs/design.md, "Replication").
const (
	// CodeNotPrimary: 503 on a standby (or a fenced old primary): this node
	// applies the primary's commands and takes none; the message names the
	// primary's address when it is known. Nothing was applied.
	CodeNotPrimary = "NOT_PRIMARY"
	// CodeAlreadyPrimary: 409 on promoting the primary.
	CodeAlreadyPrimary = "ALREADY_PRIMARY"
	// CodeReplicationUnavailable: 503: the replicated log does not confirm
	// appends (no quorum) or a promotion failed; nothing was applied.
	CodeReplicationUnavailable = "REPLICATION_UNAVAILABLE"
)

// Replica is the node's place in a replicated venue (package
// replication); ServerConfig.Replica nil: not replicated.
type Replica interface {
	// Primary tells whether this node takes commands now.
	Primary() bool
	// Accepting tells whether the primary's replicated log confirms its
	// appends: false while it has no quorum (writes then answer 503
	// REPLICATION_UNAVAILABLE at once instead of waiting).
	Accepting() bool
	// PrimaryAddr is the primary's HTTP address, "" when unknown.
	PrimaryAddr() string
	// Seq is the last command this node's state holds.
	Seq() uint64
	// Promote makes a standby the primary; it returns the new epoch.
	Promote(ctx context.Context) (uint64, error)
	// ReplicationStatus is GET /admin/v1/replication's answer.
	ReplicationStatus() any
}

// replicaHeader is the answer header giving the seq a node's state
// reflects (at least), on every answer of a replicated node.
const replicaHeader = "X-Ubs-Seq"

// promoteTimeout bounds a promotion (reading the log to its end, claiming it).
const promoteTimeout = 30 * time.Second

// notPrimary answers a write on a node that is not the primary, and any
// request but health, metrics and replication on a primary whose log has
// no quorum (its reads would wait for commands the log cannot confirm:
// the standbys serve reads then); it sets the seq header on every answer
// of a replicated node. It returns nil when the request may go on.
func (s *Server) notPrimary(ctx *fasthttp.RequestCtx) *APIError {
	if s.replica == nil {
		return nil
	}
	ctx.Response.Header.Set(replicaHeader, strconv.FormatUint(s.replica.Seq(), 10))
	path := ctx.Path()
	if hasSegPrefix(path, "/health") || hasSegPrefix(path, "/metrics") || hasSegPrefix(path, "/admin/v1/replication") {
		return nil
	}
	if s.replica.Primary() {
		if !s.replica.Accepting() {
			return Unavailable(CodeReplicationUnavailable, "the replicated log has no quorum: nothing was applied; "+
				"reads are served by the standbys; retry later")
		}
		return nil
	}
	if !writes(ctx.Method()) {
		return nil
	}
	msg := "this node is not the primary (a standby, or an old primary another node has fenced): it takes no writes"
	if a := s.replica.PrimaryAddr(); a != "" {
		msg += "; the primary is at " + a
		ctx.Response.Header.Set("X-Ubs-Primary", a)
	}
	return Unavailable(CodeNotPrimary, msg)
}

// standbyReads tells whether this node is a standby serving reads from its
// own state alone: a replica, not the primary, without the archive (a
// standby has no Postgres: docs/replication.md, "A standby and Postgres").
// What only the primary's Postgres holds — history older than History's
// window, FUNDING balances — it answers as the primary's (primaryOnly).
func (s *Server) standbyReads() bool {
	return s.replica != nil && s.archive == nil && !s.replica.Primary()
}

// primaryOnly is the answer of a standby to a read only the primary's
// Postgres answers: 503 NOT_PRIMARY naming the primary. Nothing partial is
// served instead: a page without the older part, or a "not found" for an
// order the archive holds, would be a wrong answer, not a short one.
func (s *Server) primaryOnly(what string) *APIError {
	msg := what + " is served by the primary, from its Postgres: a standby answers from its own state only"
	if a := s.replica.PrimaryAddr(); a != "" {
		msg += "; the primary is at " + a
	}
	return Unavailable(CodeNotPrimary, msg)
}

// writes tells whether an HTTP method may change state.
func writes(method []byte) bool {
	switch string(method) {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

const promotePath = "/admin/v1/replication/promote"

// POST /admin/v1/replication/promote: make this standby the primary.
func (s *Server) promote(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if s.replica.Primary() {
		return &APIError{Status: http.StatusConflict, Code: CodeAlreadyPrimary, Message: "this node is already the primary"}
	}
	c, cancel := context.WithTimeout(context.Background(), promoteTimeout)
	defer cancel()
	epoch, err := s.replica.Promote(c)
	if err != nil {
		// Not "failed": the claim may have been appended before the error;
		// the status says where the node is, and promoting again completes it.
		s.log.Error("gateway: promotion not completed", "err", err)
		return Unavailable(CodeReplicationUnavailable, "the promotion did not complete: "+err.Error()+
			" (this node may already have claimed the log: GET /admin/v1/replication, then promote again)")
	}
	return s.replyJSON(ctx, st, http.StatusOK, struct {
		Role  string `json:"role"`
		Epoch uint64 `json:"epoch"`
	}{"primary", epoch})
}

// GET /admin/v1/replication: the node's replication state.
func (s *Server) replicationStatus(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	return s.replyJSON(ctx, st, http.StatusOK, s.replica.ReplicationStatus())
}
