package gateway

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/gateway/openapi"
	"github.com/ubscore/ubscore/gateway/openapitest"
)

// uncoveredFile is the committed list of the document's (route, status)
// pairs that no test of this package exercises; it only shrinks.
const uncoveredFile = "testdata/openapi-uncovered.txt"

// TestMain runs the package's tests, every answer of the harness checked
// against the OpenAPI document (harness.raw), then, when the whole package
// ran and passed (no -run, -skip or -count filter of tests), compares the
// (route, status) pairs no test exercised with uncoveredFile: a pair newly
// uncovered fails, and so does a pair newly covered (remove its line).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && wholePackage() {
		if err := openapitest.CompareUncovered(os.Stdout, uncoveredFile); err != nil {
			fmt.Fprintln(os.Stderr, err)
			fmt.Println("FAIL: the OpenAPI coverage check (gateway/openapi_test.go)")
			code = 1
		}
	}
	os.Exit(code)
}

// wholePackage reports whether every test of the package ran: the coverage
// of a filtered run says nothing about the list.
func wholePackage() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}

// TestOpenAPIDocument: the document is a valid OpenAPI 3.1 document, every
// schema of it is closed, and GET /openapi.json answers it, without a token.
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	d, err := openapitest.Doc()
	if err != nil {
		t.Fatal(err)
	}
	if d.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", d.OpenAPI)
	}
	for _, p := range openDocSchemas() {
		t.Errorf("schema at %s", p)
	}
	h := newHarness(t)
	st, body := h.raw("GET", "/openapi.json", "", "")
	if st != 200 || !bytes.Equal(body, openapi.Document) {
		t.Fatalf("GET /openapi.json: %d, %d bytes; want 200 and the document (%d bytes)", st, len(body), len(openapi.Document))
	}
}

// ignoredKeywords are JSON Schema 2020-12 keywords kin-openapi's native
// validator (the one openapitest uses) does not check: the document must
// say the same with enum, type arrays and closed objects instead.
var ignoredKeywords = []string{"const", "prefixItems", "contains", "patternProperties", "unevaluatedProperties",
	"dependentRequired", "dependentSchemas", "if", "then", "else"}

// openDocSchemas lists the document's schemas that are not closed objects
// or use a keyword the validator ignores, by JSON path (the document itself,
// answered by /openapi.json, is described only at its top level).
func openDocSchemas() []string {
	var v any
	if err := json.Unmarshal(openapi.Document, &v); err != nil {
		return []string{"(not JSON: " + err.Error() + ")"}
	}
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			_, hasProps := x["properties"].(map[string]any)
			isObject := x["type"] == "object" || slices.Contains(anySlice(x["type"]), "object")
			ap, hasAP := x["additionalProperties"]
			open := hasProps && ap != false || isObject && (!hasAP || ap == true)
			if open && !strings.Contains(path, "/allOf/") && !strings.Contains(path, "/paths//openapi.json/") {
				out = append(out, path+": an object open to members the document does not name")
			}
			if props, ok := x["properties"].(map[string]any); ok {
				for name, ps := range props {
					m, _ := ps.(map[string]any)
					_, enum := m["enum"]
					_, pattern := m["pattern"]
					if (enum || pattern) && !slices.Contains(openapitest.ValueKeys, name) {
						out = append(out, path+"/properties/"+name+": a value constraint on a member not in openapitest.ValueKeys")
					}
				}
			}
			for _, k := range ignoredKeywords {
				if _, ok := x[k]; ok && !strings.HasSuffix(path, "/properties") {
					out = append(out, path+": "+k+", which the validator of gateway/openapitest ignores")
				}
			}
			for k, c := range x {
				walk(path+"/"+k, c)
			}
		case []any:
			for i, c := range x {
				walk(fmt.Sprintf("%s/%d", path, i), c)
			}
		}
	}
	walk("#", v)
	sort.Strings(out)
	return out
}

// TestOpenAPIRoutes matches the routes table to the document both ways:
// every route the server registers is an operation of the document with
// the same access (a security requirement for /api and /admin, the admin
// one for /admin), and every operation is a registered route. A route
// that needs an option (needing) says so with x-needs and answers 404
// without it. A new endpoint fails this test until the document has it.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	d, err := openapitest.Doc()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, r := range routes {
		registered[r.name] = true
		item := d.Paths.Value(strings.TrimPrefix(r.name, r.method+" "))
		if item == nil || item.GetOperation(r.method) == nil {
			t.Errorf("route %s is not in the OpenAPI document (gateway/openapi/openapi.json)", r.name)
			continue
		}
		op := item.GetOperation(r.method)
		var schemes []string
		if op.Security != nil {
			for _, req := range *op.Security {
				for name := range req {
					schemes = append(schemes, name)
				}
			}
		}
		want := map[access][]string{accessPublic: nil, accessUser: {"bearer"}, accessAdmin: {"admin"}}[accessOf([]byte(routePath(r)))]
		if !slices.Equal(schemes, want) {
			t.Errorf("%s: security %v in the document, the server's access needs %v", r.name, schemes, want)
		}
		if _, ok := op.Extensions["x-needs"]; ok != (r.needs != featNone) {
			t.Errorf("%s: x-needs in the document %v, the route needs an option: %v", r.name, ok, r.needs != featNone)
		}
		if r.needs != featNone && op.Responses.Status(http.StatusNotFound) == nil {
			t.Errorf("%s: needs an option, and the document has no 404 for the server without it", r.name)
		}
	}
	for p, item := range d.Paths.Map() {
		for m := range item.Operations() {
			if !registered[m+" "+p] {
				t.Errorf("the OpenAPI document has %s %s, which no route registers", m, p)
			}
		}
	}
}

// routePath is a route's path with each parameter as a literal segment.
func routePath(r route) string {
	return "/" + strings.ReplaceAll(strings.Join(r.segs, "/"), "{}", "x")
}

// TestOpenAPIAccess: what the document says of each operation's access
// holds: without a token every /api and /admin operation (and spec 003's)
// answers 401 UNAUTHORIZED, a user's token on an /admin operation 403
// FORBIDDEN, and an operation that needs an option (x-needs) answers 404
// NOT_FOUND on a server without it, to a caller the access allows.
func TestOpenAPIAccess(t *testing.T) {
	t.Parallel()
	d, err := openapitest.Doc()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t) // no transfers, chain, faults or p2p
	user := h.token(7)
	for p, item := range d.Paths.Map() {
		path := strings.NewReplacer("{", "", "}", "").Replace(p) // a parameter's name as its value
		for m, op := range item.Operations() {
			if op.Security == nil || len(*op.Security) == 0 {
				continue
			}
			admin := false
			for _, req := range *op.Security {
				_, admin = req["admin"]
			}
			expect := func(tok string, status int, code string) {
				t.Helper()
				if st, out := h.do(m, path, tok, ""); st != status || out["code"] != code {
					t.Errorf("%s %s: %d %v, want %d %s", m, path, st, out, status, code)
				}
			}
			expect("", http.StatusUnauthorized, CodeUnauthorized)
			if admin {
				expect(user, http.StatusForbidden, CodeForbidden)
			}
			if _, ok := op.Extensions["x-needs"]; ok {
				tok := user
				if admin {
					tok = h.admin
				}
				expect(tok, http.StatusNotFound, CodeNotFound)
			}
		}
	}
}

// requestSchemas are the decoder tables (jsonField) of the operations that
// take a JSON body; TestOpenAPIRequestBodies holds the document's request
// schemas to them.
var requestSchemas = map[string][]jsonField{
	"POST /api/v1/order":                                  orderSchema,
	"PATCH /api/v1/order/{id}":                            modifySchema,
	"POST /admin/v1/adjust":                               adjustSchema,
	"POST /admin/v1/accounts/{user_id}/status":            statusSchema,
	"POST /admin/v1/markets/{market}/breaker/resolve":     resolveSchema,
	"POST /admin/v1/core/breaker/resolve":                 noteSchema,
	"POST /api/v1/internal_transfer":                      transferSchema,
	"POST /admin/v1/deposit":                              depositSchema,
	"POST /admin/v1/funding/{user_id}/status":             fundingStatusSchema,
	"POST /admin/v1/faults":                               faultSchema,
	"POST /admin/v1/faults/core":                          coreFaultSchema,
	"POST /api/v1/withdrawals":                            withdrawalSchema,
	"POST /admin/v1/tx":                                   txSchema,
	"POST /admin/v1/tx/{id}/remediate":                    remediateSchema,
	"POST /admin/v1/users/{user_id}/withdrawal-limits":    limitSchema,
	"POST /admin/v1/users/{user_id}/withdrawal-allowlist": allowlistSchema,
	"POST /balance-service/users":                         p2pUserSchema,
	"POST /transfers":                                     p2pTransferSchema,
	"POST /admin/v1/binary-markets":                       binaryCreateSchema,
	"POST /admin/v1/binary-markets/{market}/{action}":     binaryActionSchema,
}

// TestOpenAPIRequestBodies: each operation's request schema names exactly
// the members its decoder accepts (any other is 400 UNKNOWN_FIELD), each with
// the JSON type the decoder takes, and null only where it reads null.
func TestOpenAPIRequestBodies(t *testing.T) {
	t.Parallel()
	d, err := openapitest.Doc()
	if err != nil {
		t.Fatal(err)
	}
	jsonType := map[jsonKind]string{jsonString: "string", jsonMoney: "string", jsonNumber: "integer",
		jsonBool: "boolean", jsonP2PAmount: "number"}
	seen := map[string]bool{}
	for p, item := range d.Paths.Map() {
		for m, op := range item.Operations() {
			name := m + " " + p
			fields, ok := requestSchemas[name]
			if op.RequestBody == nil {
				if ok {
					t.Errorf("%s decodes a body, and the document has no requestBody", name)
				}
				continue
			}
			seen[name] = true
			if !ok {
				t.Errorf("%s: the document has a requestBody, and requestSchemas no decoder table", name)
				continue
			}
			mt := op.RequestBody.Value.Content.Get("application/json")
			if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
				t.Errorf("%s: no application/json request schema", name)
				continue
			}
			s := mt.Schema.Value
			if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
				t.Errorf("%s: the request schema is not closed", name)
			}
			if len(s.Properties) != len(fields) {
				t.Errorf("%s: %d members in the document, %d in the decoder", name, len(s.Properties), len(fields))
			}
			for _, f := range fields {
				ps := s.Properties[f.name]
				if ps == nil || ps.Value == nil {
					t.Errorf("%s: member %s is not in the document", name, f.name)
					continue
				}
				want := []string{jsonType[f.kind&^jsonNullable]}
				if f.kind&jsonNullable != 0 {
					want = append(want, "null")
				}
				if got := ps.Value.Type.Slice(); !slices.Equal(got, want) {
					t.Errorf("%s: member %s has type %v in the document, the decoder takes %v", name, f.name, got, want)
				}
			}
		}
	}
	for name := range requestSchemas {
		if !seen[name] {
			t.Errorf("%s: in requestSchemas, not an operation with a requestBody in the document", name)
		}
	}
}

// TestOpenAPICoreUnavailable: the 503 SERVICE_UNAVAILABLE the document
// gives the endpoints that read or submit to the core holds for each of
// them while the core is away, and the 400 of a body sent to an endpoint
// that takes none; nothing changes.
func TestOpenAPICoreUnavailable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.binaryMarket("20", true)
	u7 := h.token(7)
	before := h.be.stateHash()
	h.be.down.Store(true)
	for _, c := range []struct{ method, path, token, body string }{
		{"GET", "/api/v1/depth/BTC-USDT", u7, ""},
		{"GET", "/api/v1/trades/BTC-USDT", u7, ""},
		{"GET", "/api/v1/my-trades", u7, ""},
		{"GET", "/api/v1/positions", u7, ""},
		{"GET", "/api/v1/binary-markets/20", u7, ""},
		{"GET", "/admin/v1/fees", h.admin, ""},
		{"POST", "/admin/v1/markets/BTC-USDT/halt", h.admin, ""},
		{"POST", "/admin/v1/markets/BTC-USDT/resume", h.admin, ""},
		{"POST", "/admin/v1/markets/BTC-USDT/breaker/resolve", h.admin, `{"target_status":"ACTIVE"}`},
		{"POST", "/admin/v1/core/breaker/resolve", h.admin, ""},
		{"POST", "/admin/v1/accounts/7/status", h.admin, `{"status":"FROZEN"}`},
		{"POST", "/admin/v1/binary-markets", h.admin, `{"market_id":21,"quote":"USDT","question":"Q?"}`},
		{"POST", "/admin/v1/binary-markets/20/suspend", h.admin, ""},
	} {
		h.fails(c.method, c.path, c.token, c.body, http.StatusServiceUnavailable, CodeServiceUnavailable)
	}
	h.be.down.Store(false)
	for _, c := range []struct{ method, path string }{
		{"GET", "/admin/v1/fees"},
		{"POST", "/admin/v1/markets/BTC-USDT/resume"},
		{"POST", "/admin/v1/core/breaker/resolve"},
	} {
		h.fails(c.method, c.path, h.admin, `{"x":1}`, http.StatusBadRequest, CodeUnknownField)
	}
	if h.be.stateHash() != before {
		t.Fatal("a refused request changed the core")
	}
}

// anySlice is v's strings when v is a JSON array.
func anySlice(v any) []any {
	l, _ := v.([]any)
	return l
}
