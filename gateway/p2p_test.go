package gateway

import (
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

// This file proves spec 003's API: every error case of §2 and §4.1 in the
// spec's check order (the first failing check wins, so each case breaks only
// the checks after the ones it passes), the error body of §4.2 plus our code,
// the security we add (token, admin-only user creation, ownership 403s), and
// the answers' field names and 2-decimal numbers.

const p2pHold = 50 * time.Millisecond // 50 commands of the fake backend's 1 ms clock

func newP2PHarness(t *testing.T) *harness {
	t.Helper()
	reg, err := NewRegistry([]Asset{{1, "USDT", 6}, {2, "BTC", 8}, {3, "USD", 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, reg: reg, be: newFakeBackend(t, reg), auth: newTestAuth(t)}
	h.ready.Store(true)
	h.clock.Store(testNow.UnixNano())
	h.srv = NewServer(ServerConfig{Backend: h.be, Auth: h.auth, Registry: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ready: h.ready.Load,
		Now: func() time.Time { return time.Unix(0, h.clock.Load()) },
		P2P: &P2PConfig{Asset: 3, Scale: 2, Hold: p2pHold}})
	h.h = h.srv.Handler()
	h.admin = mustMint(t, h.auth, 1000, true)
	return h
}

// p2pFails requires an error answer in spec 003's body with status and code.
func (h *harness) p2pFails(method, path, token, body string, status int, code string) map[string]any {
	h.t.Helper()
	st, out := h.do(method, path, token, body)
	if st != status || out["code"] != code {
		h.t.Fatalf("%s %s %.80s: got %d %v, want %d %s", method, path, body, st, out, status, code)
	}
	if out["status"] != json.Number(strconv.Itoa(status)) || out["error"] == "" || out["message"] == "" {
		h.t.Fatalf("%s %s: not the spec's error body: %v", method, path, out)
	}
	if _, err := time.Parse(time.RFC3339Nano, out["timestamp"].(string)); err != nil {
		h.t.Fatalf("timestamp: %v", err)
	}
	return out
}

// p2pUsers creates alice (id 11, 1000.00) and bob (id 12, 0) and returns their tokens.
func (h *harness) p2pUsers() (alice, bob string) {
	h.t.Helper()
	h.ok("POST", "/balance-service/users", h.admin, `{"userId":"alice","initialBalance":1000,"id":11}`)
	h.ok("POST", "/balance-service/users", h.admin, `{"userId":"bob","initialBalance":0,"id":12}`)
	return h.token(11), h.token(12)
}

func (h *harness) tick() {
	h.t.Helper()
	if evs, err := h.be.Submit(&core.Command{Kind: core.KindP2PTick}, nil); err != nil || evs[len(evs)-1].Code != core.OK {
		h.t.Fatalf("tick: %v %v", err, evs)
	}
}

func TestP2PCreateUserChecksInOrder(t *testing.T) {
	h := newP2PHarness(t)
	const path = "/balance-service/users"
	h.p2pFails("POST", path, "", `{"userId":"alice","initialBalance":1}`, 401, CodeUnauthorized)
	h.p2pFails("POST", path, h.token(5), `{"userId":"alice","initialBalance":1}`, 403, CodeForbidden)
	for _, c := range []struct{ body, code string }{
		{`{}`, CodeMissingField},
		{`{"initialBalance":-1}`, CodeMissingField},                        // userId is checked first
		{`{"userId":"ab","initialBalance":-1}`, CodeInvalidUserID},         // then its format
		{`{"userId":"a b c"}`, CodeInvalidUserID},                          // before initialBalance's presence
		{`{"userId":"alice"}`, CodeMissingField},                           // initialBalance missing
		{`{"userId":"alice","initialBalance":-100}`, CodeInvalidBalance},   // negative
		{`{"userId":"alice","initialBalance":-1.234}`, CodeInvalidBalance}, // negative before decimals
		{`{"userId":"alice","initialBalance":1000.123}`, CodeInvalidDecimalPlaces},
		{`{"userId":"alice","initialBalance":1,"id":0}`, CodeInvalidUser},
		{`{"userId":"alice","initialBalance":1,"id":1099511627776}`, CodeInvalidUser}, // the reserved range
		{`{"userId":"alice","initialBalance":"x"}`, CodeInvalidBalance},
		{`{"userId":"alice","initialBalance":true}`, CodeInvalidBalance}, // the spec's format error (issue 41)
		{`{"userId":"alice","initialBalance":1,"extra":1}`, CodeUnknownField},
	} {
		h.p2pFails("POST", path, h.admin, c.body, 400, c.code)
	}
	out := h.ok("POST", path, h.admin, `{"userId":"alice","initialBalance":1000.5}`)
	if out["userId"] != "alice" || out["balance"] != json.Number("1000.50") || out["id"] != json.Number("1099511627776") {
		t.Fatalf("created: %v", out)
	}
	if z := h.ok("POST", path, h.admin, `{"userId":"zed","initialBalance":0}`); z["balance"] != json.Number("0.00") {
		t.Fatalf("zed: %v", z)
	}
	h.p2pFails("POST", path, h.admin, `{"userId":"alice","initialBalance":1}`, 400, core.CodeUserAlreadyExists.String())
	// Trailing zeros are not decimals; 0 is a valid initial balance.
	h.ok("POST", path, h.admin, `{"userId":"carol_1-X","initialBalance":10.500,"id":77}`)
}

func TestP2PBalance(t *testing.T) {
	h := newP2PHarness(t)
	alice, bob := h.p2pUsers()
	h.p2pFails("GET", "/balance-service/users/alice/balance", "", "", 401, CodeUnauthorized)
	h.p2pFails("GET", "/balance-service/users/ab/balance", alice, "", 400, CodeInvalidUserID)
	h.p2pFails("GET", "/balance-service/users/alice/balance", bob, "", 403, CodeForbidden)
	h.p2pFails("GET", "/balance-service/users/nobody/balance", bob, "", 403, CodeForbidden) // no probing
	h.p2pFails("GET", "/balance-service/users/nobody/balance", h.admin, "", 404, CodeUserNotFound)
	h.ok("POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"bob","amount":150.25}`)
	out := h.ok("GET", "/balance-service/users/alice/balance", alice, "")
	if out["userId"] != "alice" || out["balance"] != json.Number("1000.00") || out["available"] != json.Number("849.75") ||
		out["held"] != json.Number("150.25") {
		t.Fatalf("balance: %v", out)
	}
	h.ok("GET", "/balance-service/users/bob/balance", h.admin, "")
}

func TestP2PTransferChecksInOrder(t *testing.T) {
	h := newP2PHarness(t)
	alice, bob := h.p2pUsers()
	h.p2pFails("POST", "/transfers", "", `{}`, 401, CodeUnauthorized)
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{`{}`, 400, CodeMissingField},
		{`{"toUserId":"bob","amount":1}`, 400, CodeMissingField},
		{`{"fromUserId":"alice","amount":1}`, 400, CodeMissingField},
		{`{"fromUserId":"alice","toUserId":"bob"}`, 400, CodeMissingField},
		{`{"fromUserId":"a!","toUserId":"bob","amount":0}`, 400, CodeInvalidUserID},
		{`{"fromUserId":"alice","toUserId":"alice","amount":0}`, 400, "SELF_TRANSFER"}, // before the amount
		{`{"fromUserId":"alice","toUserId":"bob","amount":0}`, 400, CodeInvalidAmount},
		{`{"fromUserId":"alice","toUserId":"bob","amount":0.001}`, 400, CodeInvalidAmount}, // < 0.01 before decimals
		{`{"fromUserId":"alice","toUserId":"bob","amount":-50}`, 400, CodeInvalidAmount},
		{`{"fromUserId":"alice","toUserId":"bob","amount":100.123}`, 400, CodeInvalidDecimalPlaces},
		{`{"fromUserId":"nobody","toUserId":"bob","amount":1}`, 403, CodeForbidden}, // not the caller: existence is not told
		{`{"fromUserId":"bob","toUserId":"alice","amount":1}`, 403, CodeForbidden},  // not the caller
		{`{"fromUserId":"alice","toUserId":"nobody","amount":1}`, 400, "RECIPIENT_NOT_FOUND"},
		{`{"fromUserId":"alice","toUserId":"bob","amount":1000.01}`, 400, "INSUFFICIENT_BALANCE"},
		{`{"fromUserId":"alice","toUserId":"bob","amount":1,"requestId":""}`, 400, CodeInvalidKey},
	} {
		h.p2pFails("POST", "/transfers", alice, c.body, c.status, c.code)
	}
	h.p2pFails("POST", "/transfers", h.admin, `{"fromUserId":"nobody","toUserId":"bob","amount":1}`, 400, "SENDER_NOT_FOUND")
	h.p2pFails("POST", "/transfers", h.admin, `{"fromUserId":"alice","toUserId":"nobody","amount":1}`, 400, "RECIPIENT_NOT_FOUND")
	out := h.ok("POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"bob","amount":150,"requestId":"r-1"}`)
	if out["status"] != "PENDING" || out["amount"] != json.Number("150.00") || out["fromUserId"] != "alice" ||
		out["toUserId"] != "bob" || out["transferId"] != json.Number("1") {
		t.Fatalf("created: %v", out)
	}
	ca, _ := time.Parse(time.RFC3339Nano, out["createdAt"].(string))
	ea, _ := time.Parse(time.RFC3339Nano, out["executeAt"].(string))
	if ea.Sub(ca) != p2pHold {
		t.Fatalf("executeAt - createdAt = %v", ea.Sub(ca))
	}
	// A repeated requestId answers the first transfer and creates nothing.
	again := h.ok("POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"bob","amount":150,"requestId":"r-1"}`)
	if again["transferId"] != out["transferId"] || again["createdAt"] != out["createdAt"] {
		t.Fatalf("repeat: %v, first %v", again, out)
	}
	if b := h.ok("GET", "/balance-service/users/alice/balance", alice, ""); b["held"] != json.Number("150.00") {
		t.Fatalf("a repeat held twice: %v", b)
	}
	h.p2pFails("POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"bob","amount":151,"requestId":"r-1"}`,
		409, "REQ_ID_CONFLICT")
	// An admin may send for anyone.
	h.ok("POST", "/transfers", h.admin, `{"fromUserId":"alice","toUserId":"bob","amount":"1.5"}`)
	_ = bob
}

func TestP2PHistoryPages(t *testing.T) {
	h := newP2PHarness(t)
	alice, bob := h.p2pUsers()
	h.p2pFails("GET", "/transfers", alice, "", 400, CodeMissingField)
	h.p2pFails("GET", "/transfers?userId=ab", alice, "", 400, CodeInvalidUserID)
	for _, q := range []string{"page=0", "size=0", "page=-1", "size=101", "page=x", "size=1.5"} {
		h.p2pFails("GET", "/transfers?userId=alice&"+q, alice, "", 400, CodeInvalidPagination)
	}
	h.p2pFails("GET", "/transfers?userId=alice", bob, "", 403, CodeForbidden)
	for i := 1; i <= 5; i++ {
		h.ok("POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"bob","amount":`+strconv.Itoa(i)+`}`)
	}
	out := h.ok("GET", "/transfers?userId=alice&page=2&size=2", alice, "")
	content := out["content"].([]any)
	if out["page"] != json.Number("2") || out["size"] != json.Number("2") || out["totalElements"] != json.Number("5") ||
		out["totalPages"] != json.Number("3") || len(content) != 2 {
		t.Fatalf("page: %v", out)
	}
	first := content[0].(map[string]any)
	if first["transferId"] != json.Number("3") || first["amount"] != json.Number("3.00") || first["completedAt"] != nil ||
		first["status"] != "PENDING" {
		t.Fatalf("newest first: %v", content)
	}
	// Executed: COMPLETED with completedAt, seen by both sides.
	for range p2pHold / time.Millisecond {
		h.tick()
	}
	out = h.ok("GET", "/transfers?userId=bob", bob, "")
	if out["totalElements"] != json.Number("5") {
		t.Fatalf("bob: %v", out)
	}
	for _, r := range out["content"].([]any) {
		if m := r.(map[string]any); m["status"] != "COMPLETED" || m["completedAt"] == nil {
			t.Fatalf("after execution: %v", m)
		}
	}
	if b := h.ok("GET", "/balance-service/users/bob/balance", bob, ""); b["balance"] != json.Number("15.00") {
		t.Fatalf("bob's balance: %v", b)
	}
}

func TestP2PCancel(t *testing.T) {
	h := newP2PHarness(t)
	alice, bob := h.p2pUsers()
	h.p2pFails("POST", "/transfers/1/cancel", "", "", 401, CodeUnauthorized)
	h.p2pFails("POST", "/transfers/999/cancel", alice, "", 404, CodeTransferNotFound)
	h.p2pFails("POST", "/transfers/abc/cancel", alice, "", 404, CodeTransferNotFound)
	h.ok("POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"bob","amount":10}`)
	h.ok("POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"bob","amount":20}`)
	h.ok("POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"bob","amount":30}`)
	h.p2pFails("POST", "/transfers/1/cancel", bob, "", 403, CodeForbidden)
	out := h.ok("POST", "/transfers/1/cancel", alice, "")
	if out["transferId"] != json.Number("1") || out["status"] != "CANCELLED" || out["cancelledAt"] == nil {
		t.Fatalf("cancel: %v", out)
	}
	if e := h.p2pFails("POST", "/transfers/1/cancel", alice, "", 400, "CANNOT_CANCEL_TRANSFER"); e["message"] != "Transfer already cancelled" {
		t.Fatalf("message: %v", e)
	}
	h.ok("POST", "/transfers/2/cancel", h.admin, "") // an operator may cancel
	// The window: at executeAt the cancel is refused even before a tick.
	for range p2pHold / time.Millisecond {
		if st, _ := h.do("GET", "/balance-service/users/alice/balance", alice, ""); st != 200 {
			t.Fatal(st)
		}
		h.be.Submit(&core.Command{Kind: core.KindSnapshot}, nil) // advance the core's clock without a tick
	}
	h.p2pFails("POST", "/transfers/3/cancel", alice, "", 400, "CANCEL_WINDOW_EXPIRED")
	h.tick()
	if e := h.p2pFails("POST", "/transfers/3/cancel", alice, "", 400, "CANNOT_CANCEL_TRANSFER"); e["message"] != "Cannot cancel completed transfer" {
		t.Fatalf("message: %v", e)
	}
	if b := h.ok("GET", "/balance-service/users/alice/balance", alice, ""); b["balance"] != json.Number("970.00") || b["held"] != json.Number("0.00") {
		t.Fatalf("alice: %v", b)
	}
}

func TestP2PParseAmount(t *testing.T) {
	for _, c := range []struct {
		in   string
		v    int64
		want p2pAmount
	}{
		{"0", 0, amtZero}, {"0.00", 0, amtZero}, {"-0", 0, amtZero}, {"0e7", 0, amtZero}, {"-0.0E-9", 0, amtZero},
		{"0.01", 1, amtOK}, {"0.001", 0, amtTooSmall}, {"0.009", 0, amtTooSmall}, {"100.123", 0, amtDecimals},
		{"100.120", 10012, amtOK}, {"-1", 0, amtNegative}, {"-0.001", 0, amtNegative}, {"-1e-9", 0, amtNegative},
		{"01", 0, amtFormat}, {"", 0, amtFormat}, {"-", 0, amtFormat}, {"1.", 0, amtFormat}, {".5", 0, amtFormat},
		{"92233720368547758.07", 9223372036854775807, amtOK}, {"92233720368547758.08", 0, amtFormat},
		// Exponent form is a number (issue 41): 1e1 is 10.00, 1e-3 below one unit.
		{"1e2", 10000, amtOK}, {"1e1", 1000, amtOK}, {"1E+1", 1000, amtOK}, {"15e-1", 150, amtOK}, {"1.5e1", 1500, amtOK},
		{"1e-2", 1, amtOK}, {"1e-3", 0, amtTooSmall}, {"1.001e1", 1001, amtOK}, {"1.0001e1", 0, amtDecimals},
		{"1000e-5", 1, amtOK}, {"1001e-5", 0, amtDecimals}, {"10.10e-1", 101, amtOK}, {"9.2233720368547758e16", 9223372036854775800, amtOK},
		{"1e17", 0, amtFormat}, {"1e999999999999", 0, amtFormat}, {"1e-999999999999", 0, amtTooSmall}, {"1e", 0, amtFormat},
		{"1e+", 0, amtFormat}, {"1ee1", 0, amtFormat}, {"1e1.5", 0, amtFormat}, {"e1", 0, amtFormat}, {"1e-0", 100, amtOK},
		{"true", 0, amtFormat}, {"[1]", 0, amtFormat}, {"{}", 0, amtFormat}, {"abc", 0, amtFormat}, {"null", 0, amtFormat},
	} {
		if v, w := parseP2PAmount([]byte(c.in), 2); v != c.v || w != c.want {
			t.Errorf("%q: %d %d, want %d %d", c.in, v, w, c.v, c.want)
		}
	}
	in := []byte("1.5e1")
	if n := testing.AllocsPerRun(100, func() { parseP2PAmount(in, 2) }); n != 0 {
		t.Errorf("parseP2PAmount allocates %v times", n)
	}
}

// FuzzP2PAmount: parseP2PAmount never panics, and what it accepts is a
// positive amount that formats back to the same value, and reads the same
// in exponent form.
func FuzzP2PAmount(f *testing.F) {
	for _, s := range []string{"0", "0.01", "0.001", "-1", "1e2", "100.120", "92233720368547758.07", "92233720368547758.08", "", "-", "01", "1.", ".5",
		"1e1", "1e-3", "1E+1", "15e-1", "0e9", "1e999999", "1e-999999", "9.2233720368547758e16", "1e", "[1]", "true"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, why := parseP2PAmount([]byte(s), 2)
		if why != amtOK {
			return
		}
		if v <= 0 {
			t.Fatalf("%q accepted as %d", s, v)
		}
		if back, w := parseP2PAmount([]byte(FormatUnits(v, 2)), 2); w != amtOK || back != v {
			t.Fatalf("%q: %d does not round-trip", s, v)
		}
		// The same value in exponent form: its units with the point moved by -2.
		if back, w := parseP2PAmount([]byte(strconv.FormatInt(v, 10)+"e-2"), 2); w != amtOK || back != v {
			t.Fatalf("%q: %de-2 reads as %d %d", s, v, back, w)
		}
	})
}
