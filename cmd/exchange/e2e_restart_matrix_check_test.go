package main

// The client-side check of TestRestartMatrix after each restart.

import (
	"encoding/json"
	"fmt"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"sort"
	"strings"
)

// rmTraders are the users whose orders, balances and positions are read.
var rmTraders = []uint64{rmMaker, rmTaker, rmThird, rmFaulty, rmFrozen}

// snapshot is every stable answer the clients can read about the venue,
// keyed by what was asked, without its "seq" (the read's position).
func (v *rmVenue) snapshot() map[string]any {
	v.t.Helper()
	out := map[string]any{}
	get := func(key, path string, user uint64, drop ...string) {
		v.t.Helper()
		tok := ""
		if user != 0 {
			tok = v.s.token(user, user == 1000)
		}
		st, b := v.s.do("GET", path, tok, nil)
		if st != 200 {
			v.t.Fatalf("%s: %d %v", path, st, b)
		}
		for _, k := range append(drop, "seq") {
			delete(b, k)
		}
		out[key] = b
	}
	for oid, o := range v.orders {
		get(fmt.Sprint("order ", oid), fmt.Sprint("/api/v1/order/", oid), o.user)
	}
	for _, u := range rmTraders {
		get(fmt.Sprint("open orders ", u), "/api/v1/orders", u)
		get(fmt.Sprint("balances ", u), "/api/v1/balances", u)
		get(fmt.Sprint("positions ", u), "/api/v1/positions", u)
		get(fmt.Sprint("trades ", u), "/api/v1/my-trades", u)
	}
	for _, m := range []string{"BTC-USDT", v.haltedSpot} {
		get("depth "+m, "/api/v1/depth/"+m, rmMaker)
	}
	for _, o := range []string{"YES", "NO"} {
		get("binary depth "+o, fmt.Sprintf("/api/v1/depth/%d?outcome=%s", v.binary, o), rmMaker)
	}
	get("binary market", fmt.Sprint("/api/v1/binary-markets/", v.binary), rmMaker)
	get("fees", "/admin/v1/fees", 1000)
	get("health/matching", "/api/v1/health/matching", 0)
	get("circuit breakers", "/admin/v1/circuit-breaker", 1000)
	for _, h := range v.p2pUsers {
		get("p2p balance "+h, "/balance-service/users/"+h+"/balance", 1000)
		get("p2p transfers "+h, "/transfers?userId="+h+"&page=1&size=10", 1000)
	}
	get("balances internal-transfer user", "/api/v1/balances", v.xUser)
	get("balances disabled FUNDING user", "/api/v1/balances", rmOff)
	get("balances withdrawing user", "/api/v1/balances", v.wUser)
	get("withdrawal", "/api/v1/withdrawals/"+v.wID, v.wUser)
	get("withdrawals", "/api/v1/withdrawals", v.wUser)
	for _, r := range []string{v.xCommitted, v.xPending} {
		// The worker retries the pending one: its retry count, last error
		// and update time move.
		get("internal transfer "+r, "/api/v1/internal_transfer/"+r, v.xUser, "retry_count", "error_message", "updated_at")
	}
	return out
}

// check is the whole client-side check after a restart; it reports every
// difference before failing.
func (v *rmVenue) check(leg string) {
	v.t.Helper()
	errorf := func(format string, args ...any) {
		v.t.Helper()
		v.t.Errorf(leg+": "+format, args...)
	}
	got := v.snapshot()
	keys := make([]string, 0, len(v.want))
	for k := range v.want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		wj, _ := json.Marshal(v.want[k])
		gj, _ := json.Marshal(got[k])
		if string(wj) != string(gj) {
			errorf("%s changed:\nbefore %s\nafter  %s", k, wj, gj)
		}
	}
	v.checkOrders(errorf, got)
	v.checkHalts(errorf, got)
	v.checkP2P(errorf)
	v.checkFunding(errorf)
	if v.t.Failed() {
		v.t.FailNow()
	}
}

// checkOrders: every order answered 200 is there as answered (or, if it
// was open, filled at least as far); no refused order exists.
func (v *rmVenue) checkOrders(errorf func(string, ...any), got map[string]any) {
	terminal := map[string]bool{"FILLED": true, "CANCELLED": true, "EXPIRED": true, "REJECTED": true}
	for oid, told := range v.orders {
		o, _ := got[fmt.Sprint("order ", oid)].(map[string]any)
		status, _ := o["status"].(string)
		filled := rmFilled(v.t, o)
		switch {
		case terminal[told.status] && (status != told.status || filled != told.filled):
			errorf("order %d: told %s filled %d, now %s filled %d", oid, told.status, told.filled, status, filled)
		case filled < told.filled:
			errorf("order %d: told filled %d, now %d", oid, told.filled, filled)
		}
	}
	for _, r := range v.refused {
		for _, key := range []string{"open orders ", "trades "} {
			if b, _ := json.Marshal(got[fmt.Sprint(key, r.user)]); strings.Contains(string(b), r.cid) {
				errorf("order %s was refused (%d %s), yet %s%d shows it: %s", r.cid, r.status, r.code, key, r.user, b)
			}
		}
	}
	st, b := v.s.do("POST", "/api/v1/order", v.s.token(rmThird, false), rmLimit("BTC-USDT", "BUY", "48000", "0.001"))
	if st != 503 || b["code"] != "CORE_HALTED" {
		errorf("an order while the core is halted: %d %v, want 503 CORE_HALTED", st, b)
	}
	// A client's retries of an order and of a spec 003 transfer while the
	// core is halted: unavailable, nothing decided (finish retries them
	// once the core is back).
	for _, r := range []struct {
		path string
		user uint64
		body any
	}{{"/api/v1/order", rmTaker, rmRetryOrder()}, {"/transfers", rmBob, rmRetryP2P}} {
		if st, b := v.s.do("POST", r.path, v.s.token(r.user, false), r.body); st != 503 || b["code"] != "CORE_HALTED" {
			errorf("a retry of POST %s while the core is halted: %d %v, want 503 CORE_HALTED", r.path, st, b)
		}
	}
}

// checkHalts: /api/v1/health/matching lists every market with its status,
// the core is halted, its breaker is open.
func (v *rmVenue) checkHalts(errorf func(string, ...any), got map[string]any) {
	h, _ := got["health/matching"].(map[string]any)
	markets, _ := h["markets"].(map[string]any)
	want := map[string]string{"BTC-USDT": "ACTIVE", v.haltedSpot: "HALTED"}
	for m, status := range want {
		mj, _ := markets[m].(map[string]any)
		if mj == nil || mj["status"] != status || mj["orderbook_loaded"] != true {
			errorf("health/matching market %s: %v, want status %s, loaded", m, mj, status)
		}
	}
	// Spec 004 §7.3 lists ACTIVE, SUSPENDED and HALTED markets: the
	// RESOLVED binary market need not be there, but if it is, as RESOLVED.
	n := len(want)
	if mj, ok := markets[fmt.Sprint(v.binary)].(map[string]any); ok {
		n++
		if mj["status"] != v.binaryState {
			errorf("health/matching binary market %d: %v, want status %s", v.binary, mj, v.binaryState)
		}
	}
	if len(markets) != n || h["core_halted"] != true || h["status"] != "degraded" {
		errorf("health/matching: %v, want the markets %v, core_halted, degraded", h, want)
	}
	if b, _ := got["binary market"].(map[string]any); b["status"] != v.binaryState || b["settling"] != true {
		errorf("binary market %d: %v, want %s, settling", v.binary, b, v.binaryState)
	}
	for status, n := range map[string]float64{"ACTIVE": 1, "SUSPENDED": 0, "HALTED": 1, "CORE_HALTED": 1} {
		if m := v.s.metric(`ubs_markets{status="` + status + `"}`); m != n {
			errorf(`ubs_markets{status=%q} = %v, want %v`, status, m, n)
		}
	}
	cb, _ := got["circuit breakers"].(map[string]any)
	open, _ := cb["open"].([]any)
	found := false
	for _, o := range open {
		if m := o.(map[string]any); m["market_id"] == "*" && m["trigger_reason"] == v.coreHalted {
			found = true
		}
	}
	if !found {
		errorf("no open core breaker %s: %v", v.coreHalted, cb)
	}
}

// checkP2P: every spec 003 transfer as told, the refused one absent, the
// balances with the pending amounts held.
func (v *rmVenue) checkP2P(errorf func(string, ...any)) {
	seen := map[string]string{}
	for _, h := range v.p2pUsers {
		_, b := v.s.do("GET", "/transfers?userId="+h+"&page=1&size=10", v.admin, nil)
		content, _ := b["content"].([]any)
		for _, c := range content {
			m := c.(map[string]any)
			seen[fmt.Sprint(m["transferId"])] = fmt.Sprint(m["status"])
		}
		_, bal := v.s.do("GET", "/balance-service/users/"+h+"/balance", v.admin, nil)
		w := v.p2pBalance[h]
		g := [3]int64{}
		for i, k := range []string{"balance", "available", "held"} {
			f, _ := bal[k].(float64)
			g[i] = int64(f*100 + 0.5)
		}
		if g != w {
			errorf("p2p %s: [balance available held] %v cents, want %v: %v", h, g, w, bal)
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(v.p2pTold) {
		errorf("p2p transfers (id -> status) %v, told %v (the refused one must not exist)", seen, v.p2pTold)
	}
	// The first page read while the core held the cancelled transfer reads
	// back the same now that only Postgres has it (p2p retention).
	for _, h := range v.p2pUsers {
		_, b := v.s.do("GET", "/transfers?userId="+h+"&page=1&size=10", v.admin, nil)
		wj, _ := json.Marshal(v.p2pPages[h])
		gj, _ := json.Marshal(b)
		if string(wj) != string(gj) {
			errorf("p2p history page of %s across the retention boundary:\nbefore %s\nafter  %s", h, wj, gj)
		}
	}
}

// checkFunding: the internal transfers as told (the pending one still in
// rmPendingState, its SPOT side done), the withdrawal in flight, both
// users' SPOT and FUNDING balances.
func (v *rmVenue) checkFunding(errorf func(string, ...any)) {
	tok := v.s.token(v.xUser, false)
	for req, state := range map[string]string{v.xCommitted: "COMMITTED", v.xPending: rmPendingState} {
		if st, b := v.s.do("GET", "/api/v1/internal_transfer/"+req, tok, nil); st != 200 || b["state"] != state {
			errorf("internal transfer %s: %d %v, want %s", req, st, b, state)
		}
	}
	_, l := v.s.do("GET", "/api/v1/internal_transfers", tok, nil)
	list, _ := l["transfers"].([]any)
	ids := map[any]bool{}
	for _, e := range list {
		ids[e.(map[string]any)["req_id"]] = true
	}
	if len(ids) != 2 || !ids[v.xCommitted] || !ids[v.xPending] { // the refused one left nothing
		errorf("internal transfers %v, want exactly %s and %s", l, v.xCommitted, v.xPending)
	}
	// A client retrying after the restart gets the same transfer and the
	// same withdrawal back, and nothing moves again.
	if st, b := v.s.do("POST", "/api/v1/internal_transfer", tok, xferBody(F, S, "USDT", "10", "cid", "rm-x1")); st != 200 ||
		b["duplicate"] != true || b["req_id"] != v.xCommitted || b["state"] != "COMMITTED" {
		errorf("internal transfer cid rm-x1 repeated: %d %v, want 200, duplicate of %s COMMITTED", st, b, v.xCommitted)
	}
	v.wantFunds(v.xUser, "USDT", 30_000000, 90_000000)
	wt := v.s.token(v.wUser, false)
	if st, w := v.s.do("GET", "/api/v1/withdrawals/"+v.wID, wt, nil); st != 200 || w["state"] != "PENDING" || w["tx_state"] != "TRACKING" {
		errorf("withdrawal %s: %d %v, want PENDING, TRACKING", v.wID, st, w)
	}
	if st, b := v.s.do("POST", "/api/v1/withdrawals", wt, map[string]any{"asset": "ETH", "amount": "0.25",
		"address": evm.Checksummed(v.wTo), "cid": "rm-w1"}); st != 202 || b["duplicate"] != true || fmt.Sprint(b["withdrawal_id"]) != v.wID {
		errorf("withdrawal cid rm-w1 repeated: %d %v, want 202, duplicate of %s", st, b, v.wID)
	}
	if _, h := v.s.do("GET", "/api/v1/withdrawals", wt, nil); len(h["withdrawals"].([]any)) != 1 {
		errorf("withdrawals: %v, want the one answered 202", h)
	}
	v.wantFunds(v.wUser, "ETH", 0, 75_000000)
	v.wantFunds(rmOff, "USDT", 0, 10_000000)
	if b := (&xt{T: v.t, s: v.s.with(v.t)}).bal(rmOff)["USDT"]; b.Status != "DISABLED" {
		errorf("user %d's FUNDING USDT is %q, want DISABLED", rmOff, b.Status)
	}
	// Conserved per asset: FUNDING + SPOT + fees + reserves + in flight + withdrawn.
	if st, inv := v.s.do("GET", "/admin/v1/invariants", v.admin, nil); st != 200 || inv["ok"] != true {
		errorf("conservation check: %d %v", st, inv)
	}
}

// wantFunds requires user's SPOT available and FUNDING available of asset.
func (v *rmVenue) wantFunds(user uint64, asset string, spot, funding int64) {
	v.t.Helper()
	x := &xt{T: v.t, s: v.s.with(v.t)}
	if b := x.bal(user)[asset]; b.Spot != spot || b.Funding != funding {
		v.t.Errorf("user %d %s: spot %d funding %d, want spot %d funding %d", user, asset, b.Spot, b.Funding, spot, funding)
	}
}
