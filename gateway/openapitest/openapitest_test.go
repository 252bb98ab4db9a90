package openapitest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

func jsonHeader() http.Header {
	return http.Header{"Content-Type": {"application/json"}}
}

// TestCheckRejects: Check accepts an answer the document describes and
// rejects each way an answer can drift from it.
func TestCheckRejects(t *testing.T) {
	if err := Check("GET", "/health/live", 200, jsonHeader(), []byte(`{"status":"live"}`)); err != nil {
		t.Fatalf("a documented answer: %v", err)
	}
	if err := Check("GET", "/api/v1/order/7", 401, jsonHeader(), []byte(`{"code":"UNAUTHORIZED","message":"no token"}`)); err != nil {
		t.Fatalf("a documented error: %v", err)
	}
	if err := Check("POST", "/admin/v1/tx", 202, jsonHeader(), []byte(`{"state":"UNKNOWN","submitter":"0x1","request_id":"r","message":"m"}`)); err != nil {
		t.Fatalf("a documented variant: %v", err) // and its shape is now cached: the PENDING one below must still fail
	}
	for _, c := range []struct {
		name           string
		method, target string
		status         int
		header         http.Header
		body           string
	}{
		{"a field the document does not name", "GET", "/health/live", 200, jsonHeader(), `{"status":"live","extra":1}`},
		{"a field of another type", "GET", "/health/live", 200, jsonHeader(), `{"status":1}`},
		{"null where the document has no null", "GET", "/health/live", 200, jsonHeader(), `{"status":null}`},
		{"a required field missing", "GET", "/health/live", 200, jsonHeader(), `{}`},
		{"a status the operation does not have", "GET", "/health/live", 418, jsonHeader(), `{"status":"live"}`},
		{"another content type", "GET", "/health/live", 200, http.Header{"Content-Type": {"text/html"}}, `{"status":"live"}`},
		{"not JSON", "GET", "/health/live", 200, jsonHeader(), `{"status":`},
		{"an error code the status does not list", "GET", "/api/v1/order/7", 401, jsonHeader(), `{"code":"FORBIDDEN","message":"x"}`},
		{"an error without its message", "GET", "/api/v1/order/7", 401, jsonHeader(), `{"code":"UNAUTHORIZED"}`},
		{"a success status on a path the document lacks", "GET", "/api/v1/nope", 200, jsonHeader(), `{}`},
		{"an error body that is not an Error", "GET", "/api/v1/nope", 404, jsonHeader(), `{"error":"x"}`},
		{"an answer of the HTTP layer that is not an Error", "POST", "/api/v1/order", 413, jsonHeader(), `{"code":"BODY_TOO_LARGE"}`},
		{"a state the variant does not have", "POST", "/admin/v1/tx", 202, jsonHeader(), `{"state":"PENDING","submitter":"0x1","request_id":"r","message":"m"}`},
	} {
		if err := Check(c.method, c.target, c.status, c.header, []byte(c.body)); err == nil {
			t.Errorf("%s: %s %s %d %s passed", c.name, c.method, c.target, c.status, c.body)
		}
	}
}

// TestNullableTypeArrays: a 3.1 type array with "null" admits null and its
// other types only (the keyword the document uses for every nullable field).
func TestNullableTypeArrays(t *testing.T) {
	s := &openapi3.Schema{Type: &openapi3.Types{"string", "null"}}
	for _, v := range []any{"x", nil} {
		if err := s.VisitJSON(v, openapi3.VisitAsResponse()); err != nil {
			t.Errorf("%v: %v", v, err)
		}
	}
	if err := s.VisitJSON(1.0, openapi3.VisitAsResponse()); err == nil {
		t.Error("a number passed a string-or-null schema")
	}
}

// TestMatchAndCoverage: a literal path wins over a parameter, a parameter is
// one whole non-empty segment, and Check records the pair it validated.
func TestMatchAndCoverage(t *testing.T) {
	if _, err := Doc(); err != nil {
		t.Fatal(err)
	}
	if m := match("/admin/v1/tx/by-request"); m == nil || m.path != "/admin/v1/tx/by-request" {
		t.Errorf("by-request matched %v", m)
	}
	if m := match("/admin/v1/tx/12"); m == nil || m.path != "/admin/v1/tx/{id}" {
		t.Errorf("tx/12 matched %v", m)
	}
	if m := match("/api/v1/order/"); m != nil {
		t.Errorf("an empty parameter matched %s", m.path)
	}
	if err := Check("GET", "/health/live", 200, jsonHeader(), []byte(`{"status":"live"}`)); err != nil {
		t.Fatal(err)
	}
	un, err := Uncovered()
	if err != nil {
		t.Fatal(err)
	}
	all, _ := Pairs()
	if slices.Contains(un, "GET /health/live 200") || !slices.Contains(all, "GET /health/live 200") {
		t.Errorf("GET /health/live 200 checked, yet uncovered (or not a pair): %v", un)
	}
	for _, p := range all {
		if strings.Count(p, " ") != 2 {
			t.Errorf("pair %q is not METHOD PATH STATUS", p)
		}
	}
}

// TestShapeKey: answers share a key only if nothing the document constrains
// differs between them: keys, kinds of values, and error codes.
func TestShapeKey(t *testing.T) {
	key := func(body string) string {
		k, ok := shapeKey("GET", "/x", 200, "application/json", []byte(body))
		if !ok {
			t.Fatalf("%s: not well-formed", body)
		}
		return k
	}
	same := [][2]string{
		{`{"a":"x","b":1,"c":[1,2],"d":null}`, `{"a":"y \"q\" :","b":22,"c":[3,4],"d":null}`},
		{`{"code":"X","message":"one"}`, `{ "code" : "X", "message": "two" }`},
	}
	for _, p := range same {
		if key(p[0]) != key(p[1]) {
			t.Errorf("%s and %s: different keys", p[0], p[1])
		}
	}
	differ := [][2]string{
		{`{"a":"x"}`, `{"a":null}`},
		{`{"a":1}`, `{"a":1.5}`},
		{`{"a":1}`, `{"a":"1"}`},
		{`{"a":true}`, `{"a":"true"}`},
		{`{"a":1}`, `{"b":1}`},
		{`{"a":1}`, `{"a":1,"b":1}`},
		{`{"a":[1]}`, `{"a":[1,1]}`},
		{`{"code":"X","message":"m"}`, `{"code":"Y","message":"m"}`},
		{`{"state":"UNKNOWN"}`, `{"state":"PENDING"}`},
	}
	for _, p := range differ {
		if key(p[0]) == key(p[1]) {
			t.Errorf("%s and %s: the same key", p[0], p[1])
		}
	}
	if _, ok := shapeKey("GET", "/x", 200, "", []byte(`{"a":`)); ok {
		t.Error("a torn body is cacheable")
	}
}

// FuzzShapeKey: any body is scanned without a panic, and only well-formed
// JSON is cacheable.
func FuzzShapeKey(f *testing.F) {
	for _, s := range []string{`{"code":"X","message":"m"}`, `{"a":[1,2.5,null,true,"\"s\\"]}`, `{"a":`, `"\`, `-`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, ok := shapeKey("GET", "/x", 200, "", b); ok && !json.Valid(b) {
			t.Fatalf("%q: cacheable, and not JSON", b)
		}
	})
}
