package gateway

import (
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// Limits and defaults of the HTTP server.
const (
	// DefaultMaxBodyBytes is the largest request body accepted (413
	// BODY_TOO_LARGE beyond). The biggest valid request, an order, is
	// under 400 bytes.
	DefaultMaxBodyBytes = 16 << 10
	// DefaultDepthLimit and MaxDepthLimit: price levels per side of GET /depth.
	DefaultDepthLimit = 20
	MaxDepthLimit     = 1_000
	// DefaultTradesLimit: trades of GET /trades (at most MaxTradesPerMarket).
	DefaultTradesLimit = 100
)

// Observer receives one call per answered request (a metrics hook). route
// is the endpoint's pattern ("POST /api/v1/order"), one of a fixed set, or
// "unmatched": safe as a metric label. It must not block.
type Observer interface {
	Observe(route string, status int, d time.Duration)
}

// RejectionObserver, if the Observer also implements it, receives the code
// of every error answer (gateway or core), e.g. "INVALID_PRICE".
type RejectionObserver interface {
	Rejected(code string)
}

// OrderArchive is an optional source of the orders and trades History no
// longer holds (e.g. the Postgres read model). It is asked outside
// Backend.Read and may do I/O.
type OrderArchive interface {
	// Order is asked only after the core and History said "not found". It
	// returns the order whoever owns it: the server checks the owner.
	Order(id core.OrderID) (OrderRecord, bool, error)
	// PersistedSeq is the last seq whose effects the archive holds.
	PersistedSeq() core.Seq
	// Orders appends to dst up to q.Limit of q.User's orders matching q,
	// newest first (without fills).
	Orders(q HistoryQuery, dst []OrderRecord) ([]OrderRecord, error)
	// Trades appends to dst up to q.Limit of q.User's trades matching q
	// (q.Statuses aside), newest first; a trade with the user on both
	// sides comes once.
	Trades(q HistoryQuery, dst []UserTrade) ([]UserTrade, error)
}

// ServerConfig configures NewServer. Backend, Auth and Registry are required.
type ServerConfig struct {
	Backend  Backend
	Auth     *Authenticator
	Registry *Registry
	Logger   *slog.Logger // nil: slog.Default()

	// MaxBodyBytes bounds request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int
	// TokenCacheSize bounds the cache of verified Authorization headers;
	// 0 means DefaultTokenCacheSize, negative disables the cache.
	TokenCacheSize int

	// Observer, if set, is told about every request (metrics).
	Observer Observer
	// Metrics, if set, is served at GET /metrics without authentication.
	Metrics fasthttp.RequestHandler
	// Ready reports whether the server may take traffic (recovery done and
	// every enabled feature initialised once); GET /health/ready answers 503
	// until it returns true. nil: always ready.
	Ready func() bool
	// Degraded, if set, lists why a dependency is not serving now (e.g.
	// Postgres away): GET /health then says "degraded" with the reasons.
	// It does not affect readiness.
	Degraded func() []string
	// Archive, if set, answers GET /order/{id} for orders History dropped.
	Archive OrderArchive
	// Now is the clock for token expiry; nil means time.Now (tests set it).
	Now func() time.Time

	// Transfers, if set, serves internal transfers FUNDING <-> SPOT, the
	// FUNDING balances in GET /balances and their admin endpoints;
	// without it those routes do not exist.
	Transfers TransferService
	// Faults, if set, serves /admin/v1/faults (fault injection for tests;
	// only with --enable-fault-injection); without it the route does not exist.
	Faults FaultInjector
	// Chain, if set, serves withdrawals to a chain and the managed-tx admin
	// API (gateway/chain.go); without it those routes do not exist.
	Chain *ChainConfig
	// CoreFaults serves POST /admin/v1/faults/core (sequenced core fault
	// commands; only with --enable-fault-injection, whose core accepts them).
	CoreFaults bool
	// Breakers, if set, is the breaker history GET /admin/v1/circuit-breaker
	// lists beside the halts in force (which come from the core).
	Breakers *BreakerLog
	// P2P, if set, serves spec 003's transfer service at its own paths
	// (gateway/p2p.go); without it those routes do not exist.
	P2P *P2PConfig
	// Replica, if set, is the node's role in a replicated venue: writes on
	// a standby answer 503 NOT_PRIMARY, every answer carries X-Ubs-Seq,
	// and the replication routes exist (replica.go).
	Replica Replica
}

// Server is the HTTP API. Create it with NewServer; it is safe for
// concurrent use by fasthttp's goroutines.
type Server struct {
	backend Backend
	auth    *Authenticator
	reg     *Registry
	log     *slog.Logger
	obs     Observer
	rej     RejectionObserver
	metrics fasthttp.RequestHandler
	ready   func() bool
	degrade func() []string
	// archiveWait bounds the wait for the archive to catch up
	// (historyArchiveWait; tests shorten it).
	archiveWait time.Duration
	archive     OrderArchive
	now         func() time.Time
	// transfers and faults are optional (nil: their routes do not exist).
	transfers TransferService
	faults    FaultInjector
	chain     *ChainConfig // nil: no chain routes
	breakers  *BreakerLog
	coreFault bool
	p2p       *P2PConfig // nil: no transfer-service routes
	replica   Replica    // nil: not replicated
	p2pIDs    sync.Map   // handle (string) -> core.UserID: p2pResolve's cache
	maxBody   int
	tokens    *tokenCache
	states    sync.Pool // *reqState
}

// reqState is the per-request scratch memory, pooled so that a request in
// steady state allocates nothing of its own. Nothing in it outlives the
// request.
type reqState struct {
	claims  Claims
	body    []byte            // the request body (<= maxBody), aliasing the request or bodyBuf
	bodyBuf []byte            // a streamed body read here
	params  [maxParams][]byte // path parameters, aliasing the request path
	vals    [MaxJSONFields]jsonValue
	scratch []byte       // unescaped JSON strings
	out     []byte       // the response body being written
	cmd     core.Command // the command submitted (here so it does not escape per request)
	evs     []core.Event // its events (Backend.Submit's dst)
	rec     OrderRecord
	fills   []Fill
	views   []core.OrderView
	recs    []OrderRecord // order history pages
	utrades []UserTrade   // my-trades pages
	bids    []core.PriceLevel
	asks    []core.PriceLevel
	trades  []Trade
}

// NewServer returns a server for cfg. It panics if Backend, Auth or
// Registry is missing (a wiring bug, not a runtime condition).
func NewServer(cfg ServerConfig) *Server {
	if cfg.Backend == nil || cfg.Auth == nil || cfg.Registry == nil {
		panic("gateway: NewServer needs Backend, Auth and Registry")
	}
	s := &Server{backend: cfg.Backend, auth: cfg.Auth, reg: cfg.Registry, log: cfg.Logger,
		obs: cfg.Observer, metrics: cfg.Metrics, ready: cfg.Ready, degrade: cfg.Degraded, archive: cfg.Archive,
		now: cfg.Now, maxBody: cfg.MaxBodyBytes, transfers: cfg.Transfers, faults: cfg.Faults,
		chain: cfg.Chain, breakers: cfg.Breakers, coreFault: cfg.CoreFaults, p2p: cfg.P2P, replica: cfg.Replica}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.archiveWait = historyArchiveWait
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	switch {
	case cfg.TokenCacheSize == 0:
		s.tokens = newTokenCache(DefaultTokenCacheSize)
	case cfg.TokenCacheSize > 0:
		s.tokens = newTokenCache(cfg.TokenCacheSize)
	}
	if r, ok := cfg.Observer.(RejectionObserver); ok {
		s.rej = r
	}
	s.states.New = func() any { return new(reqState) }
	return s
}

// Handler returns the request handler.
func (s *Server) Handler() fasthttp.RequestHandler { return s.serve }

func (s *Server) serve(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	st := s.states.Get().(*reqState)
	route := routeUnmatched
	defer s.done(ctx, st, &route, start)

	if err := s.readBody(ctx, st); err != nil {
		s.fail(ctx, st, err)
		return
	}
	path := ctx.Path()
	if acc := accessOf(path); acc != accessPublic {
		if err := s.authenticate(ctx, st, acc, start); err != nil {
			s.fail(ctx, st, err)
			return
		}
	}
	r, err := s.matchRoute(ctx.Method(), path, &st.params)
	if err == errNotFound && s.replica != nil && !s.replica.Primary() && elsewhere(ctx.Method(), path) {
		// A write the primary serves with a feature a standby does not run
		// (Postgres's transfers, deposits, withdrawals): NOT_PRIMARY, naming
		// the primary, not 404 — a client in a failover must learn where to go.
		if perr := s.notPrimary(ctx); perr != nil {
			err = perr
		}
	}
	if err != nil {
		if err.Code == CodeMethodNotAllowed {
			ctx.Response.Header.Set("Allow", s.allowedMethods(path))
		}
		s.fail(ctx, st, err)
		return
	}
	route = r.name
	if err := s.notPrimary(ctx); err != nil {
		s.fail(ctx, st, err)
		return
	}
	if err := r.h(s, ctx, st); err != nil {
		s.fail(ctx, st, err)
	}
}

// done recovers a panic in a handler (answered 500 and logged: a bug must
// not take the server down), reports the request and recycles st.
func (s *Server) done(ctx *fasthttp.RequestCtx, st *reqState, route *string, start time.Time) {
	if v := recover(); v != nil {
		s.log.Error("gateway: handler panic", "route", *route, "panic", v)
		ctx.Response.Reset()
		s.fail(ctx, st, &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"})
	}
	if s.obs != nil {
		s.obs.Observe(*route, ctx.Response.StatusCode(), time.Since(start))
	}
	st.claims = Claims{}
	st.body = nil
	st.cmd = core.Command{}
	st.rec = OrderRecord{}
	clear(st.params[:])
	clear(st.vals[:])
	s.states.Put(st)
}

// authenticate checks the bearer token (a cache hit skips the JWT check) and
// the admin role for accessAdmin.
func (s *Server) authenticate(ctx *fasthttp.RequestCtx, st *reqState, acc access, now time.Time) *APIError {
	if s.now != nil {
		now = s.now()
	}
	h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	cl, ok := s.tokens.get(h, now)
	if !ok {
		c, err := s.auth.AuthenticateAt(h, now)
		if err != nil {
			if e, ok := AsAPIError(err); ok {
				return e
			}
			return Unauthorized("invalid token")
		}
		s.tokens.put(h, c)
		cl = c
	}
	if acc == accessAdmin {
		if err := RequireAdmin(cl); err != nil {
			e, _ := AsAPIError(err)
			return e
		}
	}
	st.claims = cl
	return nil
}

// reply sends st.out as a JSON answer with status.
func (s *Server) reply(ctx *fasthttp.RequestCtx, st *reqState, status int) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.SetBody(st.out)
}

// fail sends e as the error answer, counts it and logs server-side failures.
func (s *Server) fail(ctx *fasthttp.RequestCtx, st *reqState, e *APIError) {
	if isP2PPath(ctx.Path()) {
		st.out = appendP2PError(st.out[:0], e, time.Now())
	} else {
		st.out = appendError(st.out[:0], e)
	}
	s.reply(ctx, st, e.Status)
	if s.rej != nil {
		s.rej.Rejected(e.Code)
	}
	if e.Status >= 500 && e.Code != CodeSystemBusy {
		s.log.Warn("gateway: request failed", "method", string(ctx.Method()), "path", string(ctx.Path()),
			"status", e.Status, "code", e.Code)
	}
}

// backendError maps a Backend failure to its answer.
func (s *Server) backendError(err error) *APIError {
	switch {
	case errors.Is(err, ErrBusy):
		return Unavailable(CodeSystemBusy, "the system is busy; retry later")
	case errors.Is(err, ErrUnavailable):
		return Unavailable(CodeServiceUnavailable, "the service is unavailable")
	}
	if e, ok := AsAPIError(err); ok {
		return e
	}
	s.log.Error("gateway: backend error", "err", err)
	return &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
}

// submit sends c and returns its EvResult and all its events.
func (s *Server) submit(st *reqState, c *core.Command) (*core.Event, []core.Event, *APIError) {
	evs, err := s.backend.Submit(c, st.evs[:0])
	if errors.Is(err, ErrUnavailable) {
		// The command may have been sequenced before the core stopped.
		return nil, nil, Unavailable(CodeServiceUnavailable, "the service is unavailable; the request may or "+
			"may not have been applied (retry with the same client_order_id or ref)")
	}
	if err != nil {
		return nil, nil, s.backendError(err)
	}
	st.evs = evs[:0] // keep the room for the next request on this state
	if len(evs) == 0 || evs[len(evs)-1].Kind != core.EvResult {
		s.log.Error("gateway: command without a result event", "kind", c.Kind.String())
		return nil, nil, &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
	}
	return &evs[len(evs)-1], evs, nil
}
