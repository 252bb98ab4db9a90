package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// The circuit breaker's operator endpoints (spec 004 §5.5) and the matching
// engine's health (§7.3). Trips and resolutions are sequenced commands; the
// open halts are read from the core, their history from the BreakerLog.

// MaxBreakerEvents bounds the BreakerLog (oldest resolved events go first;
// circuit_breaker_events in Postgres keeps them all).
const MaxBreakerEvents = 1_000

// BreakerEvent is one trip and, once resolved, its resolution.
type BreakerEvent struct {
	Trip       core.BreakerChange
	Resolution *core.BreakerChange // nil while the halt is in force
}

// BreakerLog is the recent breaker history, fed from the event stream
// (Apply, on the view goroutine and at the start-up warm-up) and read by
// GET /admin/v1/circuit-breaker. Safe for concurrent use.
type BreakerLog struct {
	// OnChange, if set before the first Apply, sees every change as it is
	// recorded (alerts and metrics), on Apply's goroutine.
	OnChange func(core.BreakerChange)

	mu      sync.Mutex
	events  []BreakerEvent // oldest first
	scratch []core.BreakerChange
}

// Apply records the breaker changes of one command. It runs for every
// command on the view goroutine: without a halt or resume event it returns
// before taking the lock.
func (l *BreakerLog) Apply(c *core.Command, evs []core.Event) { l.apply(c, evs, true) }

// Replay records the changes of a command applied before this process
// started (the start-up warm-up from the WAL): no OnChange.
func (l *BreakerLog) Replay(c *core.Command, evs []core.Event) { l.apply(c, evs, false) }

func (l *BreakerLog) apply(c *core.Command, evs []core.Event, live bool) {
	if !hasBreakerEvent(evs) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.scratch = core.BreakerChanges(c, evs, l.scratch[:0])
	for _, b := range l.scratch {
		if live && l.OnChange != nil {
			l.OnChange(b)
		}
		if !b.Resolve {
			l.add(BreakerEvent{Trip: b})
			continue
		}
		for i := len(l.events) - 1; i >= 0; i-- {
			if e := &l.events[i]; e.Resolution == nil && e.Trip.Market == b.Market && e.Trip.Seq < b.Seq {
				r := b
				e.Resolution = &r
				break
			}
		}
	}
}

func hasBreakerEvent(evs []core.Event) bool {
	for i := range evs {
		switch evs[i].Kind {
		case core.EvMarketHalted, core.EvCoreHalted, core.EvMarketResumed, core.EvCoreResumed:
			return true
		}
	}
	return false
}

func (l *BreakerLog) add(e BreakerEvent) {
	if len(l.events) >= MaxBreakerEvents {
		drop := 0 // the oldest resolved one; the oldest of all if every one is open
		for i := range l.events {
			if l.events[i].Resolution != nil {
				drop = i
				break
			}
		}
		l.events = append(l.events[:drop], l.events[drop+1:]...)
	}
	// In seq order: the warm-up replays older commands after the live ones
	// of the first moments (recovery's own trips).
	i := len(l.events)
	for i > 0 && l.events[i-1].Trip.Seq > e.Trip.Seq {
		i--
	}
	l.events = append(l.events, BreakerEvent{})
	copy(l.events[i+1:], l.events[i:])
	l.events[i] = e
}

// Events returns the recorded events, newest first.
func (l *BreakerLog) Events() []BreakerEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]BreakerEvent, len(l.events))
	for i, e := range l.events {
		out[len(out)-1-i] = e
	}
	return out
}

// breakerJSON is one event of GET /admin/v1/circuit-breaker (the columns of
// circuit_breaker_events).
type breakerJSON struct {
	Market         string          `json:"market_id"` // symbol, "*" for the core
	Reason         string          `json:"trigger_reason"`
	Context        json.RawMessage `json:"context"`
	TriggeredSeq   core.Seq        `json:"triggered_seq"`
	TriggeredAt    *time.Time      `json:"triggered_at"` // null: tripped before the retained history
	ResolvedSeq    core.Seq        `json:"resolved_seq,omitempty"`
	ResolvedAt     *time.Time      `json:"resolved_at"`
	ResolvedBy     *string         `json:"resolved_by"`
	Note           *string         `json:"resolution_note"`
	ResolvedStatus string          `json:"resolved_status,omitempty"`
}

func (s *Server) marketName(id core.MarketID) string {
	if id == 0 {
		return "*"
	}
	if m, ok := s.reg.MarketByID(id); ok {
		return m.Symbol
	}
	return FormatUnits(int64(id), 0)
}

func (s *Server) breakerJSON(e BreakerEvent) breakerJSON {
	t := time.Unix(0, e.Trip.Time).UTC()
	out := breakerJSON{Market: s.marketName(e.Trip.Market), Reason: e.Trip.Reason.String(),
		Context: e.Trip.ContextJSON(), TriggeredSeq: e.Trip.Seq, TriggeredAt: &t}
	if r := e.Resolution; r != nil {
		at := time.Unix(0, r.Time).UTC()
		out.ResolvedSeq, out.ResolvedAt = r.Seq, &at
		if r.User != 0 {
			by := FormatUnits(int64(r.User), 0)
			out.ResolvedBy = &by
		}
		if r.Text != "" {
			note := r.Text
			out.Note = &note
		}
		if r.Market != 0 {
			out.ResolvedStatus = r.Status.String()
		}
	}
	return out
}

// GET /admin/v1/circuit-breaker[?market=]: {"core": {halted, reason,
// since_seq}, "open": [...], "events": [...]}: the halts in force (from the
// core, with their trip from the log when it is still there) and the recent
// trips and resolutions, newest first; ?market= (a spot symbol or a binary
// market's id) keeps only that market's halts and events.
func (s *Server) listBreakers(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	var only core.MarketID // 0: every market
	if q := ctx.QueryArgs().Peek("market"); q != nil {
		id, _, err := s.opMarket(q)
		if err != nil {
			return err
		}
		only = id
	}
	mine := func(id core.MarketID) bool { return only == 0 || id == only }
	type coreJSON struct {
		Halted bool     `json:"halted"`
		Reason string   `json:"reason,omitempty"`
		Since  core.Seq `json:"since_seq,omitempty"`
	}
	var cb core.BreakerState
	var markets []core.MarketView
	if err := s.backend.Read(func(p *core.Processor, _ *History) error {
		cb, markets = p.CoreBreaker(), p.Markets()
		return nil
	}); err != nil {
		return s.backendError(err)
	}
	var events []BreakerEvent
	if s.breakers != nil {
		events = s.breakers.Events()
	}
	out := struct {
		Core   coreJSON      `json:"core"`
		Open   []breakerJSON `json:"open"`
		Events []breakerJSON `json:"events"`
	}{Core: coreJSON{Halted: cb.Reason != core.ReasonNone, Reason: cb.Reason.String(), Since: cb.Since},
		Open: []breakerJSON{}, Events: []breakerJSON{}}
	open := func(id core.MarketID, reason core.BreakerReason, since core.Seq) {
		for _, e := range events {
			if e.Trip.Market == id && e.Trip.Seq == since && e.Resolution == nil {
				out.Open = append(out.Open, s.breakerJSON(e))
				return
			}
		}
		out.Open = append(out.Open, breakerJSON{Market: s.marketName(id), Reason: reason.String(),
			Context: json.RawMessage(`{}`), TriggeredSeq: since})
	}
	if cb.Reason != core.ReasonNone && only == 0 { // filtered: the core's halt is in "core" only
		open(0, cb.Reason, cb.Since)
	}
	for _, m := range markets {
		if m.Status == core.MarketHalted && mine(m.ID) {
			open(m.ID, m.HaltReason, m.HaltedAt)
		}
	}
	for _, e := range events {
		if mine(e.Trip.Market) {
			out.Events = append(out.Events, s.breakerJSON(e))
		}
	}
	return s.replyJSON(ctx, st, http.StatusOK, out)
}

// POST /admin/v1/markets/{market}/breaker/resolve
var resolveSchema = []jsonField{{"target_status", jsonString}, {"note", jsonString}, {"cancel_all", jsonBool},
	{"rebuild", jsonBool}}

// POST /admin/v1/core/breaker/resolve
var noteSchema = []jsonField{{"note", jsonString}}

// parseNote reads an optional note: printable UTF-8 up to core.MaxTextLen bytes.
func parseNote(v jsonValue) (string, *APIError) {
	if !v.set {
		return "", nil
	}
	bad := len(v.b) > core.MaxTextLen || !utf8.Valid(v.b)
	for _, r := range string(v.b) {
		if !unicode.IsPrint(r) && r != ' ' {
			bad = true
		}
	}
	if bad {
		return "", BadRequest(CodeInvalidParameter, "note must be printable text of at most 1024 bytes")
	}
	return string(v.b), nil
}

// POST /admin/v1/markets/{market}/breaker/resolve {target_status:
// ACTIVE|SUSPENDED, note?, cancel_all?}: lifts the market's halt, only from
// HALTED and only if the market's checks pass now (409 NOT_HALTED,
// INVARIANT_VIOLATION, CORE_HALTED while the core is halted). cancel_all
// first cancels every resting order of the market (returning its frozen
// funds) in slices of core.MaxCancelSlice, each a sequenced command, then
// resolves with the book's totals rebuilt from its orders. rebuild (spec
// 004 §5.5: rebuild the book, then resume) keeps the resting orders: the
// level totals and counts are rebuilt from them, if the orders pass their
// own checks (linked, indexed, holding what their remainder can cost);
// otherwise nothing changes. An INVARIANT_VIOLATION answer names the
// failing check (resolveRefused).
func (s *Server) resolveMarketBreaker(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	id, name, err := s.opMarket(st.params[0])
	if err != nil {
		return err
	}
	v := st.vals[:len(resolveSchema)]
	if st.scratch, err = decodeObject(st.body, resolveSchema, v, st.scratch); err != nil {
		return err
	}
	if !v[0].set {
		return missing("target_status")
	}
	var target core.MarketStatus
	switch string(v[0].b) {
	case "ACTIVE":
		target = core.MarketActive
	case "SUSPENDED":
		target = core.MarketSuspended
	default:
		return BadRequest(CodeInvalidStatus, "target_status must be ACTIVE or SUSPENDED")
	}
	note, err := parseNote(v[1])
	if err != nil {
		return err
	}
	cancelAll := v[2].set && string(v[2].b) == "true"
	rebuild := v[3].set && string(v[3].b) == "true"
	if cancelAll && rebuild {
		return BadRequest(CodeInvalidParameter, "rebuild keeps the resting orders and cancel_all cancels them: send one")
	}
	var status core.MarketStatus
	if rerr := s.backend.Read(func(p *core.Processor, _ *History) error {
		mv, _ := p.Market(id)
		status = mv.Status
		return nil
	}); rerr != nil {
		return s.backendError(rerr)
	}
	if status != core.MarketHalted {
		return coreError(core.CodeNotHalted) // checked again by the core; nothing cancelled on a live market
	}
	cancelled := int64(0)
	// afterCancels is an error answered once cancel_all has cancelled
	// orders: they stay cancelled (their funds returned), so the answer
	// says how many, never only that the request failed.
	afterCancels := func(e *APIError) *APIError {
		if cancelled > 0 {
			e2 := *e
			e2.Message += " (" + strconv.FormatInt(cancelled, 10) + " resting orders were cancelled before it and stay cancelled)"
			return &e2
		}
		return e
	}
	for cancelAll {
		st.cmd = core.Command{Kind: core.KindCancelAll, Market: id, Qty: core.MaxCancelSlice}
		res, _, err := s.submit(st, &st.cmd)
		if err != nil {
			return afterCancels(err)
		}
		if res.Code != core.OK {
			return afterCancels(coreError(res.Code))
		}
		cancelled += int64(res.Qty)
		if res.Qty < core.MaxCancelSlice {
			break
		}
	}
	flags := uint8(target)
	if cancelAll || rebuild {
		flags |= core.ResumeRebuild
	}
	st.cmd = core.Command{Kind: core.KindResumeMarket, Market: id, Flags: flags, User: core.UserID(st.claims.UserID), Text: note}
	res, evs, err := s.submit(st, &st.cmd)
	if err != nil {
		return afterCancels(err)
	}
	s.log.Info("gateway: admin breaker resolve", "admin", st.claims.UserID, "market", name, "target", target.String(),
		"cancel_all", cancelAll, "rebuild", rebuild, "cancelled", cancelled, "code", res.Code.String())
	if res.Code == core.CodeInvariantViolation {
		return s.resolveRefused(ctx, st, id, cancelAll, rebuild, cancelled)
	}
	if res.Code != core.OK {
		return afterCancels(coreError(res.Code))
	}
	for i := range evs { // the status it went to: a resolved, voided or DRAFT binary market returns there, not to target
		if evs[i].Kind == core.EvMarketResumed && evs[i].Market == id {
			target = core.MarketStatus(evs[i].Detail)
		}
	}
	return s.replyJSON(ctx, st, http.StatusOK, map[string]any{"market": name, "status": target.String(),
		"cancelled_orders": cancelled, "note": note, "seq": res.Seq})
}

// resolveRefused answers a market resolve the core refused with
// INVARIANT_VIOLATION: 409 with the failing check as "check" (a breaker
// reason: ORDERBOOK_DESYNC for the book's checks, INVARIANT_* for a binary
// market's) beside code and message, the message saying what it found and
// what the operator can do next. The check is run again on the read view
// (core.ResumeCheck): it holds the state the core judged, since the refused
// command changed nothing and a halted market takes no orders.
// cancelled is how many resting orders cancel_all cancelled before the
// refusal: they stay cancelled, and the answer says so.
func (s *Server) resolveRefused(ctx *fasthttp.RequestCtx, st *reqState, id core.MarketID, cancelAll, rebuild bool,
	cancelled int64) *APIError {
	var reason core.BreakerReason
	var found string
	if err := s.backend.Read(func(p *core.Processor, _ *History) error {
		reason, found = p.ResumeCheck(id, cancelAll || rebuild)
		return nil
	}); err != nil || reason == core.ReasonNone {
		reason, found = core.ReasonNone, "not reproducible on the read view"
	}
	msg := "the market's check fails: " + found + "; it stays halted"
	switch {
	case reason != core.ReasonOrderbookDesync:
	case rebuild:
		msg = "the resting orders fail their own checks: " + found + "; it stays halted (resolve with cancel_all)"
	case !cancelAll:
		msg += " (resolve with rebuild to keep the orders if they pass their own checks, or cancel_all)"
	}
	b := append(st.out[:0], `{"code":`...)
	b = appendStr(b, core.CodeInvariantViolation.String())
	b = append(b, `,"message":`...)
	b = appendStr(b, msg)
	if reason != core.ReasonNone {
		b = append(b, `,"check":`...)
		b = appendStr(b, reason.String())
	}
	b = append(b, `,"cancelled_orders":`...)
	b = appendUint(b, uint64(cancelled))
	st.out = append(b, '}')
	s.reply(ctx, st, http.StatusConflict)
	if s.rej != nil {
		s.rej.Rejected(core.CodeInvariantViolation.String())
	}
	return nil
}

// POST /admin/v1/core/breaker/resolve {note?}: lifts a core halt, only if
// the full check passes now (409 INVARIANT_VIOLATION otherwise, NOT_HALTED
// if the core is not halted). Repairs first: adjustments by reference and
// account status changes are accepted while the core is halted.
func (s *Server) resolveCoreBreaker(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	v := st.vals[:len(noteSchema)]
	clear(v)
	var err *APIError
	if len(st.body) > 0 { // the body is optional
		if st.scratch, err = decodeObject(st.body, noteSchema, v, st.scratch); err != nil {
			return err
		}
	}
	note, err := parseNote(v[0])
	if err != nil {
		return err
	}
	st.cmd = core.Command{Kind: core.KindResumeCore, User: core.UserID(st.claims.UserID), Text: note}
	res, _, err := s.submit(st, &st.cmd)
	if err != nil {
		return err
	}
	s.log.Info("gateway: admin core breaker resolve", "admin", st.claims.UserID, "code", res.Code.String())
	if res.Code != core.OK {
		return coreError(res.Code)
	}
	return s.replyJSON(ctx, st, http.StatusOK, map[string]any{"core_halted": false, "note": note, "seq": res.Seq})
}

func loaded(p *core.Processor, id core.MarketID) bool {
	_, ok := p.Market(id)
	return ok
}

// Overall states of GET /api/v1/health/matching (spec 004 §7.3).
const (
	MatchingHealthy  = "healthy"  // no market halted, the core not halted
	MatchingDegraded = "degraded" // a market (or the core) is halted or a market is not loaded: the rest serves
)

// GET /api/v1/health/matching (public, like /health): {"status",
// "halted_markets", "active_markets", "core_halted", "markets": {NAME:
// {"status", "orderbook_loaded", "order_count"}}}. Always 200 while the core
// answers (degraded is still serving); 503 when it does not.
//
// The markets are every market the core holds in ACTIVE, SUSPENDED or
// HALTED (§7.3: a binary market in DRAFT, RESOLVED, SETTLED or VOIDED is
// not serving the matching engine; an archived one is gone from the core),
// read from the core rather than the Registry, which never holds binary
// markets: NAME is a spot market's symbol or a binary market's id ("20").
// A registered spot market the core lacks is listed as MISSING.
func (s *Server) healthMatching(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	type marketJSON struct {
		Status string `json:"status"`
		Loaded bool   `json:"orderbook_loaded"`
		Orders int32  `json:"order_count"`
	}
	out := struct {
		Status     string                `json:"status"`
		Halted     int                   `json:"halted_markets"`
		Active     int                   `json:"active_markets"`
		CoreHalted bool                  `json:"core_halted"`
		Markets    map[string]marketJSON `json:"markets"`
	}{Status: MatchingHealthy, Markets: map[string]marketJSON{}}
	if err := s.backend.Read(func(p *core.Processor, _ *History) error {
		out.CoreHalted = p.Halted()
		for i := range s.reg.markets {
			if reg := &s.reg.markets[i]; !loaded(p, reg.ID) {
				out.Markets[reg.Symbol] = marketJSON{Status: "MISSING"}
			}
		}
		for _, v := range p.Markets() {
			switch v.Status {
			case core.MarketActive, core.MarketSuspended, core.MarketHalted:
				out.Markets[s.marketName(v.ID)] = marketJSON{Status: v.Status.String(), Loaded: true, Orders: v.Orders}
			}
		}
		return nil
	}); err != nil {
		return s.backendError(err)
	}
	for _, m := range out.Markets {
		if m.Status == core.MarketHalted.String() {
			out.Halted++
		}
		if !m.Loaded || m.Status == core.MarketHalted.String() {
			out.Status = MatchingDegraded
		}
	}
	out.Active = len(out.Markets) - out.Halted
	if out.CoreHalted {
		out.Status = MatchingDegraded
	}
	return s.replyJSON(ctx, st, http.StatusOK, out)
}
