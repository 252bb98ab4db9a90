package gateway

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// Health and metrics endpoints: no authentication, nothing private.

// Overall states of GET /health.
const (
	HealthHealthy   = "healthy"   // 200: ready, every registered market loaded and active
	HealthDegraded  = "degraded"  // 200: serving, but a market is halted or not loaded, or a dependency is away (ServerConfig.Degraded)
	HealthUnhealthy = "unhealthy" // 503: not ready, the core is halted or unreachable
)

// GET /health/live: 200 while the process serves HTTP at all.
func (s *Server) live(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	st.out = append(st.out[:0], `{"status":"live"}`...)
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// GET /health/ready: 503 until ServerConfig.Ready reports true (recovery
// and the invariant check done): a load balancer's signal to send traffic.
func (s *Server) readiness(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	if s.ready != nil && !s.ready() { // expected while starting: answered, not logged
		st.out = appendError(st.out[:0], Unavailable(CodeServiceUnavailable, "not ready"))
		s.reply(ctx, st, http.StatusServiceUnavailable)
		return nil
	}
	st.out = append(st.out[:0], `{"status":"ready"}`...)
	s.reply(ctx, st, http.StatusOK)
	return nil
}

// marketHealth is one market's line in GET /health.
type marketHealth struct {
	m      *Market
	loaded bool // configured in the core
	status core.MarketStatus
	orders int32
}

// GET /health: {"status", "ready", "core_halted", "seq", "degraded":[reasons],
// "markets":[{"market","status","orders","book_loaded"}], "history":{...}}.
// A market's status is ACTIVE, SUSPENDED, HALTED or MISSING (in the registry,
// not in the core).
func (s *Server) health(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	var (
		mh         = make([]marketHealth, len(s.reg.markets))
		seq        core.Seq
		coreHalted bool
		hs         HistoryStats
	)
	ready := s.ready == nil || s.ready()
	err := s.backend.Read(func(p *core.Processor, h *History) error {
		for i := range s.reg.markets {
			mh[i].m = &s.reg.markets[i]
			if v, ok := p.Market(mh[i].m.ID); ok {
				mh[i].loaded, mh[i].status, mh[i].orders = true, v.Status, v.Orders
			}
		}
		seq, coreHalted, hs = p.LastSeq(), p.Halted(), h.Stats()
		return nil
	})
	var reasons []string
	if s.degrade != nil {
		reasons = s.degrade()
	}
	overall := HealthHealthy
	if len(reasons) > 0 {
		overall = HealthDegraded
	}
	for i := range mh {
		if !mh[i].loaded || mh[i].status != core.MarketActive {
			overall = HealthDegraded
		}
	}
	if err != nil || !ready || coreHalted {
		overall = HealthUnhealthy
	}
	b := append(st.out[:0], `{"status":`...)
	b = appendStr(b, overall)
	b = append(b, `,"ready":`...)
	b = appendBool(b, ready)
	b = append(b, `,"core_halted":`...)
	b = appendBool(b, coreHalted)
	b = append(b, `,"seq":`...)
	b = appendUint(b, uint64(seq))
	b = append(b, `,"degraded":[`...)
	for i, r := range reasons {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStr(b, r)
	}
	b = append(b, `],"markets":[`...)
	for i := range mh {
		if err != nil {
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		status := mh[i].status.String()
		if !mh[i].loaded {
			status = "MISSING"
		}
		b = append(b, `{"market":`...)
		b = appendStr(b, mh[i].m.Symbol)
		b = append(b, `,"status":`...)
		b = appendStr(b, status)
		b = append(b, `,"orders":`...)
		b = appendUint(b, uint64(max(mh[i].orders, 0)))
		b = append(b, `,"book_loaded":`...)
		b = appendBool(b, mh[i].loaded)
		b = append(b, '}')
	}
	b = append(b, `],"history":{"live_orders":`...)
	b = appendUint(b, uint64(hs.LiveOrders))
	b = append(b, `,"finished_orders":`...)
	b = appendUint(b, uint64(hs.FinishedOrders))
	b = append(b, `,"fills":`...)
	b = appendUint(b, uint64(hs.Fills))
	st.out = append(b, "}}"...)
	code := http.StatusOK
	if overall == HealthUnhealthy {
		code = http.StatusServiceUnavailable
	}
	s.reply(ctx, st, code)
	return nil
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// GET /metrics: ServerConfig.Metrics, or 404 when none is set.
func (s *Server) serveMetrics(ctx *fasthttp.RequestCtx, _ *reqState) *APIError {
	if s.metrics == nil {
		return errNotFound
	}
	s.metrics(ctx)
	return nil
}
