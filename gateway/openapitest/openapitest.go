// Package openapitest checks HTTP answers against the OpenAPI document of
// the gateway (gateway/openapi.Document), for the tests: every
// answer the harnesses receive goes through Check, which fails on a status,
// a content type or a body the document does not describe (closed schemas:
// a field it does not name is a mismatch), and records the (route, status)
// pair it exercised, so that a package's TestMain can compare the pairs no
// test exercised with its committed list (Uncovered, CompareUncovered).
//
// The document is parsed and validated once per process.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/ubscore/ubscore/gateway/openapi"
)

// Doc is the parsed document; it fails the process's first caller if the
// document is not a valid OpenAPI 3.1 document.
func Doc() (*openapi3.T, error) {
	loadOnce.Do(load)
	return doc, loadErr
}

var (
	loadOnce sync.Once
	doc      *openapi3.T
	loadErr  error
	tmpls    []tmpl

	mu      sync.Mutex
	covered = map[string]bool{} // pair -> an answer was checked
	valid   = map[string]bool{} // shapeKey -> an answer of this shape passed
)

// tmpl is one path of the document, split into segments ("" for a parameter).
type tmpl struct {
	path string
	segs []string
	item *openapi3.PathItem
}

func load() {
	// encoding/json, then the references: Loader.LoadFromData reads JSON
	// through its YAML parser first, ~5 times slower (~1 s under -race).
	d := new(openapi3.T)
	if err := json.Unmarshal(openapi.Document, d); err != nil {
		loadErr = fmt.Errorf("openapi.json: %w", err)
		return
	}
	if err := openapi3.NewLoader().ResolveRefsIn(d, nil); err != nil {
		loadErr = fmt.Errorf("openapi.json: %w", err)
		return
	}
	if err := d.Validate(context.Background()); err != nil {
		loadErr = fmt.Errorf("openapi.json is not a valid document: %w", err)
		return
	}
	if !d.IsOpenAPI31OrLater() {
		loadErr = fmt.Errorf("openapi.json is OpenAPI %s, not 3.1", d.OpenAPI)
		return
	}
	for p, item := range d.Paths.Map() {
		t := tmpl{path: p, item: item}
		for _, sg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
			if strings.HasPrefix(sg, "{") && strings.HasSuffix(sg, "}") {
				sg = ""
			}
			t.segs = append(t.segs, sg)
		}
		tmpls = append(tmpls, t)
	}
	doc = d
}

// match finds the document's path of a request path: of those that match,
// the one with the most literal segments (/admin/v1/tx/by-request before
// /admin/v1/tx/{id}, as the server's routes table orders them).
func match(path string) *tmpl {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var best *tmpl
	bestLit := -1
	for i := range tmpls {
		t := &tmpls[i]
		if len(t.segs) != len(segs) {
			continue
		}
		lit, ok := 0, true
		for j, sg := range t.segs {
			switch {
			case sg == "":
				ok = segs[j] != "" // a parameter is one whole, non-empty segment
			case sg == segs[j]:
				lit++
			default:
				ok = false
			}
			if !ok {
				break
			}
		}
		if ok && lit > bestLit {
			best, bestLit = t, lit
		}
	}
	return best
}

// beforeRouting are the statuses the server answers before it looks at the
// route (the HTTP layer: a request it could not read): any path may get
// them, with the error body of components/schemas/Error.
var beforeRouting = []int{http.StatusRequestTimeout, http.StatusRequestEntityTooLarge,
	http.StatusRequestHeaderFieldsTooLarge}

// Check validates one answer to method target (a path with an optional
// query) against the document and records its (route, status) pair. An
// answer to a path or method the document does not have must be a routing
// or authentication error (401, 403, 404, 405) with an Error body.
func Check(method, target string, status int, header http.Header, body []byte) error {
	d, err := Doc()
	if err != nil {
		return err
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return fmt.Errorf("openapi: request target %q: %w", target, err)
	}
	t := match(u.Path)
	var op *openapi3.Operation
	if t != nil {
		op = t.item.GetOperation(method)
	}
	if method == http.MethodHead && t != nil && t.item.Get != nil {
		return nil // no body to check; the GET's answer is
	}
	code := ""
	if status == http.StatusBadRequest || status == http.StatusInternalServerError {
		code = errorCode(body)
	}
	if op == nil || slices.Contains(beforeRouting, status) || code == codeBadRequest || code == codeInternal {
		return checkGeneric(d, method, u.Path, op == nil, status, header, body)
	}
	key, cacheable := shapeKey(method, t.path, status, header.Get("Content-Type"), body)
	mu.Lock()
	known := cacheable && valid[key]
	mu.Unlock()
	if known {
		mu.Lock()
		covered[pair(method, t.path, status)] = true
		mu.Unlock()
		return nil
	}
	if err := checkResponse(op, status, header, body); err != nil {
		return fmt.Errorf("openapi: %s %s answered %d, which %s %s does not describe: %v\nbody: %.2000s",
			method, target, status, method, t.path, err, body)
	}
	mu.Lock()
	covered[pair(method, t.path, status)] = true
	if cacheable {
		valid[key] = true
	}
	mu.Unlock()
	return nil
}

// ValueKeys are the members whose values the document constrains (enum,
// pattern): error codes and the UNKNOWN states. TestOpenAPIDocument holds
// the document to it: a value constraint on another member must be added
// here, or shapeKey would take answers that differ in it for one.
var ValueKeys = []string{"code", "state"}

// shapeKey is what decides an answer's validity against the document:
// the operation, the status, the content type and the body's skeleton —
// every key, the kind of every value (string, integer, other number, bool,
// null) and the values of the ValueKeys members. Answers of one
// shape are validated once per process: the end-to-end suites receive tens
// of thousands of answers of a few hundred shapes. ok is false for a body
// that is not well-formed JSON (validated, and failed, every time).
func shapeKey(method, path string, status int, ct string, b []byte) (key string, ok bool) {
	var k strings.Builder
	k.Grow(len(b) / 2)
	k.WriteString(method + " " + path + " " + strconv.Itoa(status) + " " + ct + " ")
	keep := false // the last key is one of ValueKeys
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			j := i + 1
			for ; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
			if j >= len(b) {
				return "", false
			}
			str := b[i : j+1]
			n := j + 1
			for n < len(b) && (b[n] == ' ' || b[n] == '\n' || b[n] == '\t' || b[n] == '\r') {
				n++
			}
			switch {
			case n < len(b) && b[n] == ':': // a key
				k.Write(str)
				keep = slices.Contains(ValueKeys, string(str[1:len(str)-1]))
			case keep:
				k.Write(str)
			default:
				k.WriteByte('s')
			}
			i = j
		case c == '-' || c >= '0' && c <= '9':
			j, frac := i, false
			for ; j < len(b) && strings.IndexByte("+-0123456789.eE", b[j]) >= 0; j++ {
				frac = frac || b[j] == '.' || b[j] == 'e' || b[j] == 'E'
			}
			if frac {
				k.WriteByte('n')
			} else {
				k.WriteByte('i')
			}
			i = j - 1
		case c == 't' || c == 'f':
			k.WriteByte('b')
			for i+1 < len(b) && b[i+1] >= 'a' && b[i+1] <= 'z' {
				i++
			}
		case c == 'n':
			k.WriteByte('z')
			for i+1 < len(b) && b[i+1] >= 'a' && b[i+1] <= 'z' {
				i++
			}
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
		default:
			k.WriteByte(c)
		}
	}
	return k.String(), json.Valid(b)
}

// checkResponse validates an answer against op's response for status: the
// status must be documented, the content type too, and a JSON body must
// match the schema. The schema is walked by kin-openapi's own validator
// (openapi3.Schema.VisitJSON), which needs no compilation per call: its JSON
// Schema 2020-12 mode compiles the schema at every call (~2 ms), which
// would slow every end-to-end suite. The keywords the document uses
// (type arrays with "null", properties, required, additionalProperties,
// items, enum, allOf, oneOf, pattern) mean the same in both;
// TestCheckRejects holds it.
func checkResponse(op *openapi3.Operation, status int, header http.Header, body []byte) error {
	ref := op.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("status %d is not documented", status)
	}
	ct := header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("Content-Type %q: %v", ct, err)
	}
	media := ref.Value.Content.Get(mt)
	if media == nil {
		return fmt.Errorf("Content-Type %q is not documented", ct)
	}
	if media.Schema == nil || media.Schema.Value == nil || mt != "application/json" {
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("the body is not JSON: %v", err)
	}
	return media.Schema.Value.VisitJSON(v, openapi3.MultiErrors(), openapi3.VisitAsResponse())
}

// checkGeneric checks an answer outside the document's operations: the
// HTTP layer's errors, and routing and authentication errors on paths or
// methods it does not have.
func checkGeneric(d *openapi3.T, method, path string, unknown bool, status int, header http.Header, body []byte) error {
	code := errorCode(body)
	ok := slices.Contains(beforeRouting, status) || code == codeBadRequest && status == 400 || code == codeInternal && status == 500
	if unknown {
		ok = ok || slices.Contains([]int{401, 403, 404, 405}, status)
	}
	if !ok {
		return fmt.Errorf("openapi: %s %s answered %d, and the document has no such operation: %.500s", method, path, status, body)
	}
	if ct := header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("openapi: %s %s answered %d with Content-Type %q, not application/json", method, path, status, ct)
	}
	name := "Error"
	if strings.HasPrefix(path, "/transfers") || strings.HasPrefix(path, "/balance-service") {
		name = "P2PError"
	}
	s := d.Components.Schemas[name]
	if s == nil || s.Value == nil {
		return fmt.Errorf("openapi: the document has no components/schemas/%s", name)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("openapi: %s %s answered %d with a body that is not JSON: %.500s", method, path, status, body)
	}
	if err := s.Value.VisitJSON(v, openapi3.MultiErrors(), openapi3.VisitAsResponse()); err != nil {
		return fmt.Errorf("openapi: %s %s answered %d with a body that is not a %s: %v\nbody: %.500s", method, path, status, name, err, body)
	}
	return nil
}

// errorCode is the "code" of an error body, or "".
func errorCode(body []byte) string {
	var e struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Code
}

func pair(method, path string, status int) string {
	return method + " " + path + " " + strconv.Itoa(status)
}

// Pairs is every (method path, status) the document describes, sorted.
func Pairs() ([]string, error) {
	d, err := Doc()
	if err != nil {
		return nil, err
	}
	var out []string
	for p, item := range d.Paths.Map() {
		for m, op := range item.Operations() {
			for code := range op.Responses.Map() {
				n, err := strconv.Atoi(code)
				if err != nil {
					return nil, fmt.Errorf("openapi: %s %s: response %q is not a status code", m, p, code)
				}
				out = append(out, pair(m, p, n))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Uncovered is every pair of Pairs that no Check of this process saw, sorted.
func Uncovered() ([]string, error) {
	all, err := Pairs()
	if err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for _, p := range all {
		if !covered[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// CompareUncovered compares Uncovered with the committed list in file (one
// pair a line): the list only shrinks. A pair no test exercises any more
// fails; a pair now exercised fails too, asking to remove its line, so that
// a later loss of it is caught. UBS_OPENAPI_UNCOVERED_UPDATE=1 rewrites the
// file instead. It prints the uncovered pairs to w.
func CompareUncovered(w io.Writer, file string) error {
	now, err := Uncovered()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "openapi: %d (route, status) pairs no test exercised (%s):\n", len(now), file)
	for _, p := range now {
		fmt.Fprintln(w, "  "+p)
	}
	text := strings.Join(now, "\n") + "\n"
	if os.Getenv("UBS_OPENAPI_UNCOVERED_UPDATE") == "1" {
		return os.WriteFile(file, []byte(text), 0o644)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("openapi: %w (UBS_OPENAPI_UNCOVERED_UPDATE=1 writes it)", err)
	}
	var was []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			was = append(was, l)
		}
	}
	var lost, gained []string
	for _, p := range now {
		if !slices.Contains(was, p) {
			lost = append(lost, p)
		}
	}
	for _, p := range was {
		if !slices.Contains(now, p) {
			gained = append(gained, p)
		}
	}
	var msg bytes.Buffer
	if len(lost) > 0 {
		fmt.Fprintf(&msg, "openapi: no test exercises these (route, status) pairs any more (test them, or remove them from the document):\n  %s\n",
			strings.Join(lost, "\n  "))
	}
	if len(gained) > 0 {
		fmt.Fprintf(&msg, "openapi: these pairs are exercised now: remove their lines from %s (the list only shrinks):\n  %s\n",
			file, strings.Join(gained, "\n  "))
	}
	if msg.Len() > 0 {
		return fmt.Errorf("%s", msg.String())
	}
	return nil
}

// Transport wraps base (nil: http.DefaultTransport) so that every answer
// read through it is checked with Check; a mismatch fails t (t.Errorf: the
// callers may be load goroutines). The answer's body is read whole and
// handed on unchanged.
func Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{t: t, base: base}
}

type transport struct {
	t    testing.TB
	base http.RoundTripper
}

func (c *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err // a torn answer (a server killed mid-answer) is the caller's transport error
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := Check(req.Method, req.URL.RequestURI(), resp.StatusCode, resp.Header, body); err != nil {
		c.t.Errorf("%v", err)
	}
	return resp, nil
}

// codeBadRequest is gateway.CodeBadRequest (this package cannot import
// gateway: the gateway's own tests import it).
const (
	codeBadRequest = "BAD_REQUEST"
	codeInternal   = "INTERNAL_ERROR"
)
