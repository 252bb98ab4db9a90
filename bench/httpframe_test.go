package bench

// frameResponse against hand-written answers, and fuzzed: it never panics,
// never frames past what it was given, a prefix of a response is never an
// error, and what it frames fasthttp parses to the same status and length.

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

var frameCases = []struct {
	in     string
	head   bool
	n      int // -1: an error
	status int
	close  bool
}{
	{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, 40, 200, false},
	{"HTTP/1.1 404 Not Found\r\ncontent-length:  3 \r\nConnection: close\r\n\r\nabc", false, 69, 404, true},
	{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", false, 49, 200, false}, // headers in, body not yet
	{"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", false, 35, 200, false},        // no reason phrase
	{"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false, 38, 200, true},
	{"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false, 62, 200, false},
	{"HTTP/1.1 204 No Content\r\n\r\n", false, 27, 204, false},
	{"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", false, 49, 304, false},
	{"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", true, 39, 200, false},
	{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", false, 59, 200, false},
	{"HTTP/1.1 200 OK\r\nContent-Len", false, 0, 0, false},
	{"HTT", false, 0, 0, false},
	{"", false, 0, 0, false},
	{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false, -1, 0, false},
	{"HTTP/1.1 200 OK\r\n\r\n", false, -1, 0, false}, // no length: read until close
	{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", false, -1, 0, false},
	{"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false, -1, 0, false},
	{"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", false, -1, 0, false},
	{"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", false, -1, 0, false},
	{"HTTP/1.1 100 Continue\r\n\r\n", false, -1, 0, false},
	{"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", false, -1, 0, false},
	{"HTTP/1.1 099 OK\r\nContent-Length: 0\r\n\r\n", false, -1, 0, false},
	{"HTTP/2 200 OK\r\n\r\n", false, -1, 0, false},
	{"GET / HTTP/1.1\r\n\r\n", false, -1, 0, false},
	{"HTTP/1.1 200 OK\r\n\nContent-Length: 0\r\n\r\n", false, -1, 0, false}, // bare LF
}

func TestFrameResponse(t *testing.T) {
	for _, c := range frameCases {
		f, err := frameResponse([]byte(c.in), c.head)
		switch {
		case c.n < 0:
			if err == nil {
				t.Errorf("%q: framed %+v, want an error", c.in, f)
			}
		case err != nil || f.n != c.n || (c.n > 0 && (f.status != c.status || f.close != c.close)):
			t.Errorf("%q: %+v %v, want n %d status %d close %v", c.in, f, err, c.n, c.status, c.close)
		}
	}
	if _, err := frameResponse([]byte("HTTP/1.1 200 OK\r\nX: "+strings.Repeat("a", maxResponseHeader)), false); !errors.Is(err, errRespHeader) {
		t.Errorf("endless headers: %v", err)
	}
}

func FuzzFrameResponse(f *testing.F) {
	for _, c := range frameCases {
		f.Add([]byte(c.in), c.head)
		f.Add([]byte(c.in[:len(c.in)/2]), c.head) // truncated
	}
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 67108864\r\n\r\n"), false) // the limit
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 67108865\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n"), false) // two answers
	f.Fuzz(func(t *testing.T, b []byte, head bool) {
		fr, err := frameResponse(b, head)
		if err != nil {
			return
		}
		if fr.n < 0 || (fr.n > 0 && (fr.status < 100 || fr.status > 999)) || fr.n > len(b)+maxResponseHeader+maxResponseBody {
			t.Fatalf("%q: %+v", b, fr)
		}
		// Every prefix is incomplete, not an error, and frames the same once the headers are in.
		for k := range len(b) {
			p, err := frameResponse(b[:k], head)
			if err != nil || (p.n != 0 && p.n != fr.n) || (p.n == 0 && k >= fr.n && fr.n > 0) {
				t.Fatalf("%q: prefix %d framed %+v %v, the whole %+v", b, k, p, err, fr)
			}
		}
		if fr.n == 0 || fr.n > len(b) {
			return
		}
		// fasthttp reads a complete answer the same way.
		resp := fasthttp.AcquireResponse()
		defer fasthttp.ReleaseResponse(resp)
		resp.SkipBody = head
		br := bufio.NewReader(bytes.NewReader(b[:fr.n]))
		if err := resp.Read(br); err != nil {
			return // fasthttp is stricter about some headers; framing is what matters here
		}
		if resp.StatusCode() != fr.status || (!head && fr.status != 204 && fr.status != 304 && len(resp.Body()) != fr.n-bytes.Index(b, []byte("\r\n\r\n"))-4) {
			t.Fatalf("%q: framed %+v, fasthttp status %d body %d", b, fr, resp.StatusCode(), len(resp.Body()))
		}
	})
}
