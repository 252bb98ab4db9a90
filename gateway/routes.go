package gateway

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"
)

// access is who may call a path. It is decided by prefix before routing, so
// an unauthenticated caller learns nothing about which paths exist.
type access uint8

const (
	accessPublic access = iota // /health*, /metrics, /openapi.json
	accessUser                 // /api/...: a valid token
	accessAdmin                // /admin/...: a valid token with the admin role
)

func accessOf(path []byte) access {
	switch {
	case string(path) == matchingHealthPath:
		return accessPublic // load balancers call it without a token, like /health
	case hasSegPrefix(path, "/api"):
		return accessUser
	case hasSegPrefix(path, "/admin"):
		return accessAdmin
	case isP2PPath(path):
		return accessUser // spec 003's paths (p2p.go): the token is required there too
	}
	return accessPublic
}

// hasSegPrefix reports whether path is prefix or starts with prefix + "/".
func hasSegPrefix(path []byte, prefix string) bool {
	return bytes.HasPrefix(path, []byte(prefix)) && (len(path) == len(prefix) || path[len(prefix)] == '/')
}

// handler answers one matched request: it writes the success response
// itself and returns nil, or returns the error to answer with.
type handler func(s *Server, ctx *fasthttp.RequestCtx, st *reqState) *APIError

// route is one endpoint: a method and a path of literal segments and "{}"
// parameters (each one whole, non-empty segment).
type route struct {
	method string
	segs   []string
	name   string // metrics label, e.g. "GET /api/v1/order/{id}"
	h      handler
	needs  feature // the route exists only when the server has it
}

// feature is an optional part of the server: routes that need a missing
// one do not exist (404, and absent from Allow).
type feature uint8

const (
	featNone       feature = iota
	featTransfers          // ServerConfig.Transfers
	featFaults             // ServerConfig.Faults (--enable-fault-injection)
	featChain              // ServerConfig.Chain (--chain-rpc)
	featCoreFaults         // ServerConfig.CoreFaults (--enable-fault-injection)
	featP2P                // ServerConfig.P2P (spec 003's transfer service)
	featReplica            // ServerConfig.Replica (a replicated venue)
)

func (s *Server) has(f feature) bool {
	switch f {
	case featTransfers:
		return s.transfers != nil
	case featFaults:
		return s.faults != nil
	case featChain:
		return s.chain != nil
	case featCoreFaults:
		return s.coreFault
	case featP2P:
		return s.p2p != nil
	case featReplica:
		return s.replica != nil
	}
	return true
}

// matchingHealthPath is spec 004 §7.3's health endpoint: under /api, yet public.
const matchingHealthPath = "/api/v1/health/matching"

// maxParams is the most "{}" segments in a route.
const maxParams = 2

// routeUnmatched is the metrics label of requests no route matched.
const routeUnmatched = "unmatched"

// routes is every endpoint. Each one is an operation of the OpenAPI
// document (gateway/openapi/openapi.json), with its answers and error codes:
// TestOpenAPIRoutes fails until a new route is described there.
var routes = []route{
	mkRoute("POST", "/api/v1/order", (*Server).postOrder),
	mkRoute("GET", "/api/v1/order/{id}", (*Server).getOrder),
	mkRoute("DELETE", "/api/v1/order/{id}", (*Server).cancelOrder),
	mkRoute("PATCH", "/api/v1/order/{id}", (*Server).modifyOrder),
	mkRoute("GET", "/api/v1/orders", (*Server).listOrders),
	mkRoute("GET", "/api/v1/my-trades", (*Server).myTrades),
	mkRoute("GET", "/api/v1/depth/{market}", (*Server).depth),
	mkRoute("GET", "/api/v1/trades/{market}", (*Server).trades),
	mkRoute("GET", "/api/v1/balances", (*Server).balances),
	mkRoute("POST", "/admin/v1/adjust", (*Server).adjust),
	mkRoute("GET", "/admin/v1/fees", (*Server).fees),
	mkRoute("POST", "/admin/v1/markets/{market}/halt", (*Server).halt),
	mkRoute("POST", "/admin/v1/markets/{market}/resume", (*Server).resume),
	mkRoute("POST", "/admin/v1/accounts/{user_id}/status", (*Server).accountStatus),
	mkRoute("GET", "/admin/v1/circuit-breaker", (*Server).listBreakers),
	mkRoute("POST", "/admin/v1/markets/{market}/breaker/resolve", (*Server).resolveMarketBreaker),
	mkRoute("POST", "/admin/v1/core/breaker/resolve", (*Server).resolveCoreBreaker),
	mkRoute("GET", matchingHealthPath, (*Server).healthMatching),
	needing(featTransfers, mkRoute("POST", "/api/v1/internal_transfer", (*Server).postTransfer)),
	needing(featTransfers, mkRoute("GET", "/api/v1/internal_transfer/{req_id}", (*Server).getTransfer)),
	needing(featTransfers, mkRoute("GET", "/api/v1/internal_transfers", (*Server).listTransfers)),
	needing(featTransfers, mkRoute("POST", "/admin/v1/deposit", (*Server).deposit)),
	needing(featTransfers, mkRoute("POST", "/admin/v1/funding/{user_id}/status", (*Server).fundingStatus)),
	needing(featTransfers, mkRoute("GET", "/admin/v1/invariants", (*Server).invariants)),
	needing(featTransfers, mkRoute("POST", "/admin/v1/transfers/resume", (*Server).resumeTransfers)),
	needing(featFaults, mkRoute("POST", "/admin/v1/faults", (*Server).injectFault)),
	needing(featFaults, mkRoute("DELETE", "/admin/v1/faults", (*Server).clearFaults)),
	needing(featCoreFaults, mkRoute("POST", "/admin/v1/faults/core", (*Server).injectCoreFault)),
	mkRoute("GET", "/health/live", (*Server).live),
	mkRoute("GET", "/health/ready", (*Server).readiness),
	mkRoute("GET", "/health", (*Server).health),
	mkRoute("GET", "/metrics", (*Server).serveMetrics),
	mkRoute("GET", "/openapi.json", (*Server).openAPI),
	needing(featChain, mkRoute("POST", "/api/v1/withdrawals", (*Server).postWithdrawal)),
	needing(featChain, mkRoute("GET", "/api/v1/withdrawals", (*Server).listWithdrawals)),
	needing(featChain, mkRoute("GET", "/api/v1/withdrawals/{id}", (*Server).getWithdrawal)),
	needing(featChain, mkRoute("POST", "/admin/v1/tx", (*Server).postTx)),
	needing(featChain, mkRoute("GET", "/admin/v1/tx/by-request", (*Server).getTxByRequest)), // literal paths before {id}
	needing(featChain, mkRoute("GET", "/admin/v1/tx/completions", (*Server).txCompletions)),
	needing(featChain, mkRoute("GET", "/admin/v1/tx/{id}", (*Server).getTx)),
	needing(featChain, mkRoute("POST", "/admin/v1/tx/{id}/remediate", (*Server).remediateTx)),
	needing(featChain, mkRoute("GET", "/admin/v1/users/{user_id}/withdrawal-limits", (*Server).getWithdrawalLimits)),
	needing(featChain, mkRoute("POST", "/admin/v1/users/{user_id}/withdrawal-limits", (*Server).setWithdrawalLimit)),
	needing(featChain, mkRoute("DELETE", "/admin/v1/users/{user_id}/withdrawal-limits", (*Server).clearWithdrawalLimit)),
	needing(featChain, mkRoute("POST", "/admin/v1/users/{user_id}/withdrawal-allowlist", (*Server).allowWithdrawalAddress)),
	needing(featChain, mkRoute("DELETE", "/admin/v1/users/{user_id}/withdrawal-allowlist", (*Server).disallowWithdrawalAddress)),
	needing(featReplica, mkRoute("POST", promotePath, (*Server).promote)),
	needing(featReplica, mkRoute("GET", "/admin/v1/replication", (*Server).replicationStatus)),
	needing(featP2P, mkRoute("POST", "/balance-service/users", (*Server).postP2PUser)),
	needing(featP2P, mkRoute("GET", "/balance-service/users/{userId}/balance", (*Server).getP2PBalance)),
	needing(featP2P, mkRoute("POST", "/transfers", (*Server).postP2PTransfer)),
	needing(featP2P, mkRoute("GET", "/transfers", (*Server).listP2PTransfers)),
	needing(featP2P, mkRoute("POST", "/transfers/{transferId}/cancel", (*Server).cancelP2PTransfer)),
	// binary markets (binary.go)
	mkRoute("POST", "/admin/v1/binary-markets", (*Server).createBinary),
	mkRoute("POST", "/admin/v1/binary-markets/{market}/{action}", (*Server).binaryAction),
	mkRoute("GET", "/api/v1/binary-markets/{market}", (*Server).getBinary),
	mkRoute("GET", "/api/v1/positions", (*Server).positions),
}

func needing(f feature, r route) route {
	r.needs = f
	return r
}

func mkRoute(method, pattern string, h handler) route {
	segs := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	n := 0
	for i, sg := range segs {
		if strings.HasPrefix(sg, "{") {
			segs[i] = "{}"
			n++
		}
	}
	if n > maxParams {
		panic("gateway: route " + pattern + " has more than maxParams parameters")
	}
	return route{method: method, segs: segs, name: method + " " + pattern, h: h}
}

// matchRoute finds the route of method and path; 404 NOT_FOUND if no route
// has the path, 405 METHOD_NOT_ALLOWED if some route has it with another
// method. It does not allocate.
func (s *Server) matchRoute(method, path []byte, params *[maxParams][]byte) (*route, *APIError) {
	pathFound := false
	for i := range routes {
		r := &routes[i]
		if !s.has(r.needs) || !matchPath(r.segs, path, params) {
			continue
		}
		if string(method) == r.method || (r.method == "GET" && string(method) == "HEAD") {
			return r, nil
		}
		pathFound = true
	}
	if pathFound {
		return nil, errMethodNotAllowed
	}
	return nil, errNotFound
}

// elsewhere tells whether method and path name a route of a feature this
// server does not run (a standby runs none of Postgres's): another node of
// the venue may serve it.
func elsewhere(method, path []byte) bool {
	var params [maxParams][]byte
	for i := range routes {
		r := &routes[i]
		if r.needs != 0 && string(method) == r.method && matchPath(r.segs, path, &params) {
			return true
		}
	}
	return false
}

var (
	errNotFound         = &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such endpoint"}
	errMethodNotAllowed = &APIError{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed, Message: "method not allowed on this endpoint"}
)

// allowedMethods is the Allow header for a path that matched with another method.
func (s *Server) allowedMethods(path []byte) string {
	var params [maxParams][]byte
	var ms []string
	for i := range routes {
		if s.has(routes[i].needs) && matchPath(routes[i].segs, path, &params) {
			ms = append(ms, routes[i].method)
		}
	}
	return strings.Join(ms, ", ")
}

// matchPath matches "/seg/seg/..." against segs, capturing "{}" segments.
func matchPath(segs []string, path []byte, params *[maxParams][]byte) bool {
	if len(path) == 0 || path[0] != '/' {
		return false
	}
	rest := path[1:]
	n := 0
	for i, sg := range segs {
		j := bytes.IndexByte(rest, '/')
		last := i == len(segs)-1
		if last != (j < 0) {
			return false // too few or too many segments
		}
		cur := rest
		if j >= 0 {
			cur, rest = rest[:j], rest[j+1:]
		}
		if sg == "{}" {
			if len(cur) == 0 {
				return false
			}
			params[n] = cur
			n++
		} else if string(cur) != sg {
			return false
		}
	}
	return true
}
