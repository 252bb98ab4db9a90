package gateway

// Spec 003's answers that issue 41 found wrong (#6): a value below one unit
// or in exponent form, the created user's balance when its id already held
// money, null for a required field, and a non-numeric amount, which is the
// spec's format error rather than our INVALID_FIELD_TYPE.

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestP2PCreateUserAmountForms(t *testing.T) {
	h := newP2PHarness(t)
	const path = "/balance-service/users"
	for _, c := range []struct{ body, code string }{
		// Below one unit has too many decimals, like 1000.123 (§3.1 step 2.5); negative first.
		{`{"userId":"u_small","initialBalance":0.001}`, CodeInvalidDecimalPlaces},
		{`{"userId":"u_small","initialBalance":0.009}`, CodeInvalidDecimalPlaces},
		{`{"userId":"u_small","initialBalance":"0.001"}`, CodeInvalidDecimalPlaces},
		{`{"userId":"u_small","initialBalance":1e-3}`, CodeInvalidDecimalPlaces},
		{`{"userId":"u_small","initialBalance":1000.123}`, CodeInvalidDecimalPlaces},
		{`{"userId":"u_small","initialBalance":-0.001}`, CodeInvalidBalance},
		// Not a number: the spec's format error.
		{`{"userId":"u_bad","initialBalance":true}`, CodeInvalidBalance},
		{`{"userId":"u_bad","initialBalance":false}`, CodeInvalidBalance},
		{`{"userId":"u_bad","initialBalance":[1]}`, CodeInvalidBalance},
		{`{"userId":"u_bad","initialBalance":{}}`, CodeInvalidBalance},
		{`{"userId":"u_bad","initialBalance":{"a":[1,{"b":null}],"c":"\u0041"}}`, CodeInvalidBalance},
		{`{"userId":"u_bad","initialBalance":"abc"}`, CodeInvalidBalance},
		{`{"userId":"u_bad","initialBalance":""}`, CodeInvalidBalance},
		// null is absent: MISSING_FIELD, in the spec's order.
		{`{"userId":null,"initialBalance":1}`, CodeMissingField},
		{`{"userId":"u_null","initialBalance":null}`, CodeMissingField},
		{`{"initialBalance":[1]}`, CodeMissingField}, // userId is checked before the balance's form
		{`{"userId":null,"initialBalance":true}`, CodeMissingField},
		{`{"userId":"ab","initialBalance":true}`, CodeInvalidUserID},
		// The JSON itself stays strict.
		{`{"userId":"u_json","initialBalance":[1,}`, CodeInvalidJSON},
		{`{"userId":"u_json","initialBalance":{"a"}}`, CodeInvalidJSON},
		{`{"userId":"u_json","initialBalance":nul}`, CodeInvalidJSON},
		{`{"userId":"u_json","initialBalance":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, CodeInvalidJSON},
		{`{"userId":null,"userId":"u_dup","initialBalance":1}`, CodeDuplicateField},
		{`{"userId":"u_dup","initialBalance":null,"initialBalance":1}`, CodeDuplicateField},
	} {
		h.p2pFails("POST", path, h.admin, c.body, 400, c.code)
	}
	// Exponent form is a number: 1e1 is 10.00.
	for _, c := range []struct{ body, balance string }{
		{`{"userId":"u_e1","initialBalance":1e1}`, "10.00"},
		{`{"userId":"u_e2","initialBalance":1E+1}`, "10.00"},
		{`{"userId":"u_e3","initialBalance":15e-1}`, "1.50"},
		{`{"userId":"u_e4","initialBalance":1e-2}`, "0.01"},
		{`{"userId":"u_e5","initialBalance":"2.5e2"}`, "250.00"},
		{`{"userId":"u_e6","initialBalance":0e5}`, "0.00"},
		{`{"userId":"u_e7","initialBalance":0,"id":null}`, "0.00"}, // an optional null is absent too
	} {
		if out := h.ok("POST", path, h.admin, c.body); out["balance"] != json.Number(c.balance) {
			t.Errorf("%s: balance %v, want %s", c.body, out["balance"], c.balance)
		}
	}
}

// TestP2PCreateUserAnswersCurrentBalance: §2.1.1's balance is the user's
// balance now, so a handle bound to an account that already held money
// answers what it holds, not only the initial credit.
func TestP2PCreateUserAnswersCurrentBalance(t *testing.T) {
	h := newP2PHarness(t)
	h.ok("POST", "/admin/v1/adjust", h.admin, `{"user_id":21,"asset":"USD","amount":"5.25","ref":"pre-21"}`)
	out := h.ok("POST", "/balance-service/users", h.admin, `{"userId":"rich","initialBalance":1,"id":21}`)
	if out["balance"] != json.Number("6.25") || out["id"] != json.Number("21") {
		t.Fatalf("created over a funded account: %v, want balance 6.25", out)
	}
	if b := h.ok("GET", "/balance-service/users/rich/balance", h.admin, ""); b["balance"] != out["balance"] {
		t.Fatalf("the answer %v is not the balance %v", out["balance"], b["balance"])
	}
}

func TestP2PTransferAmountForms(t *testing.T) {
	h := newP2PHarness(t)
	alice, _ := h.p2pUsers()
	for _, c := range []struct{ body, code string }{
		{`{"fromUserId":"alice","toUserId":"bob","amount":true}`, CodeInvalidAmount},
		{`{"fromUserId":"alice","toUserId":"bob","amount":[1]}`, CodeInvalidAmount},
		{`{"fromUserId":"alice","toUserId":"bob","amount":{"v":1}}`, CodeInvalidAmount},
		{`{"fromUserId":"alice","toUserId":"bob","amount":"abc"}`, CodeInvalidAmount},
		{`{"fromUserId":"alice","toUserId":"bob","amount":1e-3}`, CodeInvalidAmount}, // < 0.01 before decimals
		{`{"fromUserId":"alice","toUserId":"bob","amount":0e3}`, CodeInvalidAmount},
		{`{"fromUserId":"alice","toUserId":"bob","amount":1.0001e1}`, CodeInvalidDecimalPlaces},
		{`{"fromUserId":"alice","toUserId":"bob","amount":null}`, CodeMissingField},
		{`{"fromUserId":null,"toUserId":"bob","amount":1}`, CodeMissingField},
		{`{"fromUserId":"alice","toUserId":null,"amount":true}`, CodeMissingField},
	} {
		h.p2pFails("POST", "/transfers", alice, c.body, 400, c.code)
	}
	for _, c := range []struct{ body, amount string }{
		{`{"fromUserId":"alice","toUserId":"bob","amount":1e1}`, "10.00"},
		{`{"fromUserId":"alice","toUserId":"bob","amount":1.001e1,"requestId":null}`, "10.01"},
		{`{"fromUserId":"alice","toUserId":"bob","amount":25E-1}`, "2.50"},
	} {
		if out := h.ok("POST", "/transfers", alice, c.body); out["amount"] != json.Number(c.amount) {
			t.Errorf("%s: amount %v, want %s", c.body, out["amount"], c.amount)
		}
	}
}

// FuzzP2PUserRequest: decoding a create-user body never panics, what it
// accepts is valid JSON, and a non-string initialBalance it keeps is one
// whole JSON value (the text the spec's format error is judged on).
func FuzzP2PUserRequest(f *testing.F) {
	for _, s := range []string{
		`{"userId":"alice","initialBalance":1000}`, `{"userId":"alice","initialBalance":1e-3}`,
		`{"userId":null,"initialBalance":[1,{"a":"\u0041"}]}`, `{"userId":"a","initialBalance":[1,}`,
		`{"userId":"a","initialBalance":` + strings.Repeat("[", 40), `{"initialBalance":true,"id":null}`,
		`{"userId":"a","initialBalance":{"a"}}`, `{"initialBalance":nul}`, `{"userId":null,"userId":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		vals := make([]jsonValue, len(p2pUserSchema))
		_, err := decodeObject(body, p2pUserSchema, vals, nil)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if v := vals[1]; v.set && len(v.b) > 0 && (v.b[0] == '[' || v.b[0] == '{' || v.b[0] == 't' || v.b[0] == 'f') &&
			!json.Valid(v.b) {
			t.Fatalf("%q: kept %q, not one JSON value", body, v.b)
		}
	})
}
