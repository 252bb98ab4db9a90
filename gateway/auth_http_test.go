package gateway

// These tests prove that every /api/v1 and /admin/v1 endpoint refuses a
// missing, malformed, expired, forged or alg-none token with 401
// UNAUTHORIZED before doing anything, that a non-admin token gets 403 on
// every admin endpoint, that another user's order is a 404, and that the
// verified-token cache never outlives a token's expiry.

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"
)

// protected lists one request per authenticated endpoint.
var protected = []struct{ method, path, body string }{
	{"POST", "/api/v1/order", `{"market":"BTC-USDT","side":"BUY","type":"LIMIT","price":"50000","quantity":"0.1"}`},
	{"GET", "/api/v1/order/1", ""},
	{"DELETE", "/api/v1/order/1", ""},
	{"PATCH", "/api/v1/order/1", `{"price":"50000"}`},
	{"GET", "/api/v1/orders", ""},
	{"GET", "/api/v1/depth/BTC-USDT", ""},
	{"GET", "/api/v1/trades/BTC-USDT", ""},
	{"GET", "/api/v1/balances", ""},
	{"POST", "/admin/v1/adjust", `{"user_id":7,"asset":"USDT","amount":"1","ref":"x"}`},
	{"POST", "/admin/v1/markets/BTC-USDT/halt", ""},
	{"POST", "/admin/v1/markets/BTC-USDT/resume", ""},
	{"POST", "/admin/v1/accounts/7/status", `{"status":"FROZEN"}`},
}

func TestAuthFailures(t *testing.T) {
	h := newHarness(t)
	b64 := base64.RawURLEncoding.EncodeToString
	forger, err := NewAuthenticator(otherSecret)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := forger.Mint(7, true, time.Hour, testNow)
	expired, _ := h.auth.Mint(7, true, time.Hour, testNow.Add(-2*time.Hour))
	none := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64([]byte(exp("7", time.Hour))) + "."
	valid := mustMint(t, h.auth, 7, true)
	for _, tok := range []struct{ name, token string }{
		{"missing", ""},
		{"malformed", "not-a-jwt"},
		{"expired", expired},
		{"forged", forged},
		{"alg none", none},
		{"HS512 with the secret", rawHS256(`{"alg":"HS512","typ":"JWT"}`, exp("7", time.Hour), testSecret)},
		{"sub not a user id", claimsToken(exp("0", time.Hour))},
		{"no exp", claimsToken(`{"sub":"7"}`)},
		{"truncated signature", valid[:len(valid)-2]},
		{"wrong scheme", "!Basic " + valid},
		{"empty bearer", "!Bearer "},
	} {
		for _, r := range protected {
			before, n := h.be.stateHash(), h.be.submits.Load()
			h.fails(r.method, r.path, tok.token, r.body, 401, "UNAUTHORIZED")
			if h.be.stateHash() != before || h.be.submits.Load() != n {
				t.Fatalf("%s on %s %s reached the core", tok.name, r.method, r.path)
			}
		}
	}
	// A valid non-admin token: 403 on every admin endpoint, before the core.
	u7 := h.token(7)
	for _, r := range protected {
		if r.path[:6] != "/admin" {
			continue
		}
		n := h.be.submits.Load()
		h.fails(r.method, r.path, u7, r.body, 403, "FORBIDDEN")
		if h.be.submits.Load() != n {
			t.Fatalf("non-admin %s %s reached the core", r.method, r.path)
		}
	}
	// The scheme is case-insensitive.
	if st, _ := h.raw("GET", "/api/v1/balances", "!bearer "+u7, ""); st != 200 {
		t.Fatalf("lower-case scheme: %d", st)
	}
	// Health needs no token.
	if st, _ := h.raw("GET", "/health", "", ""); st != 200 {
		t.Fatalf("health without a token: %d", st)
	}
}

func TestOtherUsersOrderIsNotFound(t *testing.T) {
	h := newHarness(t)
	h.fund(1, "BTC", "1")
	o := h.ok("POST", "/api/v1/order", h.token(1), orderBody("side", "SELL"))
	id := itoa(int64(num(t, o["order_id"])))
	u2, admin := h.token(2), h.admin
	for _, tok := range []string{u2, admin} { // an admin token is no exception on /api/v1
		h.fails("GET", "/api/v1/order/"+id, tok, "", 404, "ORDER_NOT_FOUND")
		h.fails("DELETE", "/api/v1/order/"+id, tok, "", 404, "ORDER_NOT_FOUND")
		h.fails("PATCH", "/api/v1/order/"+id, tok, `{"price":"1"}`, 404, "ORDER_NOT_FOUND")
	}
	// The order is untouched.
	if o2 := h.ok("GET", "/api/v1/order/"+id, h.token(1), ""); o2["status"] != "NEW" || o2["price"] != o["price"] {
		t.Fatalf("order after others' attempts: %v", o2)
	}
	// Finished orders too.
	h.ok("DELETE", "/api/v1/order/"+id, h.token(1), "")
	h.fails("GET", "/api/v1/order/"+id, u2, "", 404, "ORDER_NOT_FOUND")
}

// A cached token is refused once its exp (+ Leeway) has passed.
func TestTokenCacheHonoursExpiry(t *testing.T) {
	h := newHarness(t)
	tok, err := h.auth.Mint(7, false, time.Minute, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := h.raw("GET", "/api/v1/balances", tok, ""); st != 200 {
		t.Fatalf("fresh token: %d", st)
	}
	h.clock.Store(testNow.Add(time.Minute + Leeway - time.Nanosecond).UnixNano())
	if st, _ := h.raw("GET", "/api/v1/balances", tok, ""); st != 200 {
		t.Fatalf("token within leeway: %d", st)
	}
	h.clock.Store(testNow.Add(time.Minute + Leeway).UnixNano())
	st, out := h.do("GET", "/api/v1/balances", tok, "")
	if st != 401 || out["message"] != "token expired" {
		t.Fatalf("expired cached token: %d %v", st, out)
	}
}

func TestTokenCacheBounded(t *testing.T) {
	c := newTokenCache(4)
	for i := range 10 {
		c.put([]byte(fmt.Sprint("Bearer t", i)), Claims{UserID: uint64(i + 1), ExpiresAt: testNow.Add(time.Hour)})
		if len(c.m) > 4 {
			t.Fatalf("cache grew to %d", len(c.m))
		}
	}
	if cl, ok := c.get([]byte("Bearer t9"), testNow); !ok || cl.UserID != 10 {
		t.Fatalf("latest entry: %v %v", cl, ok)
	}
	if _, ok := c.get([]byte("Bearer t9 "), testNow); ok {
		t.Fatal("a different header hit")
	}
	var nilCache *tokenCache
	if _, ok := nilCache.get([]byte("x"), testNow); ok {
		t.Fatal("disabled cache hit")
	}
	nilCache.put([]byte("x"), Claims{})
}
