package gateway

// These tests prove that the hand-written JSON output is valid JSON that
// decodes to the original text (invalid UTF-8 replaced), and that requests
// fasthttp cannot read get the API's error format.

import (
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

func TestAppendStr(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x1f\t\n<>&", "é😀日本", "bad\xffutf8\xc3", "\x7f",
		string([]byte{0xed, 0xa0, 0x80})} {
		for _, out := range [][]byte{appendStr(nil, s), appendStrBytes(nil, []byte(s))} {
			if !json.Valid(out) {
				t.Fatalf("%q: invalid JSON %q", s, out)
			}
			var back string
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			if want := replaceInvalid(s); back != want {
				t.Fatalf("%q -> %q -> %q, want %q", s, out, back, want)
			}
		}
	}
}

// replaceInvalid replaces each byte that is not part of valid UTF-8 by U+FFFD.
func replaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\ufffd")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

func TestErrorHandler(t *testing.T) {
	obs := &recordingObserver{}
	h := newHarness(t, func(c *ServerConfig) { c.Observer = obs })
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fasthttp.ErrBodyTooLarge, 413, CodeBodyTooLarge},
		{&fasthttp.ErrSmallBuffer{}, 431, CodeHeaderTooLarge},
		{&net.OpError{Op: "read", Err: timeoutErr{}}, 408, CodeRequestTimeout},
		{errors.New("garbage"), 400, CodeBadRequest},
	} {
		var ctx fasthttp.RequestCtx
		h.srv.ErrorHandler(&ctx, c.err)
		var out map[string]string
		if err := json.Unmarshal(ctx.Response.Body(), &out); err != nil || ctx.Response.StatusCode() != c.status ||
			out["code"] != c.code || out["message"] == "" {
			t.Fatalf("%v: %d %s", c.err, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	if obs.routes[routeUnmatched] != 4 || obs.codes[CodeBodyTooLarge] != 1 {
		t.Fatalf("observer %v %v", obs.routes, obs.codes)
	}
}
