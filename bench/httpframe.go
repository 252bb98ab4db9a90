package bench

import (
	"bytes"
	"errors"
)

// Limits of the responses frameResponse accepts.
const (
	maxResponseHeader = 64 << 10 // status line and headers, up to and including CRLFCRLF
	maxResponseBody   = 64 << 20 // Content-Length
)

// respFrame is one framed HTTP/1.x response.
type respFrame struct {
	n      int  // total length, headers and body; 0 = incomplete, the headers are not all there yet
	status int  // 100..999, when n > 0
	close  bool // the server ends the connection after it (Connection: close, or HTTP/1.0 without keep-alive)
}

var (
	errRespNotHTTP  = errors.New("bench: response does not start with an HTTP/1.x status line")
	errRespHeader   = errors.New("bench: response headers longer than 64 KiB")
	errRespLength   = errors.New("bench: response Content-Length invalid or over 64 MiB")
	errRespChunked  = errors.New("bench: response Transfer-Encoding is not supported (chunked)")
	errRespNoLength = errors.New("bench: response has no Content-Length (read-until-close is not supported)")
)

// frameResponse finds the one HTTP/1.x response that starts b, the answer
// to a request with method HEAD if head. The result's n is the response's
// length, which may exceed len(b) (the headers are in, the body is not
// all there yet), or 0 if the headers are not all in b. An error means b
// cannot start a response this reader frames: the connection is unusable.
//
// Only the status code, Content-Length, Transfer-Encoding and Connection
// are read; lines end in CRLF. A prefix of a response is never an error,
// only incomplete (the load generator calls this on every partial read).
func frameResponse(b []byte, head bool) (respFrame, error) {
	const proto = "HTTP/1."
	if !bytes.HasPrefix(b, []byte(proto)) && !bytes.HasPrefix([]byte(proto), b) {
		return respFrame{}, errRespNotHTTP
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) >= maxResponseHeader {
			return respFrame{}, errRespHeader
		}
		return respFrame{}, nil
	}
	hdr := b[:end+2] // each line, the last too, ends in CRLF
	if end+4 > maxResponseHeader {
		return respFrame{}, errRespHeader
	}
	// "HTTP/1.x SSS" and then a reason, or nothing.
	if len(hdr) < 14 || hdr[7] < '0' || hdr[7] > '9' || hdr[8] != ' ' || (hdr[12] != ' ' && hdr[12] != '\r') {
		return respFrame{}, errRespNotHTTP
	}
	f := respFrame{close: hdr[7] == '0'}
	for _, c := range hdr[9:12] {
		if c < '0' || c > '9' {
			return respFrame{}, errRespNotHTTP
		}
		f.status = f.status*10 + int(c-'0')
	}
	if f.status < 100 {
		return respFrame{}, errRespNotHTTP
	}
	sl := bytes.IndexByte(hdr, '\n') // present: hdr ends in CRLF
	if hdr[sl-1] != '\r' {
		return respFrame{}, errRespNotHTTP // a bare LF
	}
	length := -1
	for line := hdr[sl+1:]; len(line) > 0; {
		eol := bytes.IndexByte(line, '\n') // present: hdr ends in CRLF
		if eol == 0 || line[eol-1] != '\r' {
			return respFrame{}, errRespNotHTTP // a bare LF
		}
		name, value, ok := bytes.Cut(line[:eol-1], []byte(":"))
		line = line[eol+1:]
		if !ok {
			continue
		}
		value = bytes.Trim(value, " \t")
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, ok := parseLength(value)
			if !ok || (length >= 0 && n != length) {
				return respFrame{}, errRespLength
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("identity")) {
				return respFrame{}, errRespChunked
			}
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				f.close = true
			} else if bytes.EqualFold(value, []byte("keep-alive")) {
				f.close = false
			}
		}
	}
	switch {
	case head || f.status == 204 || f.status == 304:
		length = 0 // no body whatever the headers say (RFC 9112 6.3)
	case f.status < 200:
		// An interim answer (100 Continue) to a request that did not ask for one.
		return respFrame{}, errRespNotHTTP
	case length < 0:
		return respFrame{}, errRespNoLength
	}
	f.n = end + 4 + length
	return f, nil
}

// parseLength reads a Content-Length: decimal digits, at most maxResponseBody.
func parseLength(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n = n*10 + int(c-'0'); n > maxResponseBody {
			return 0, false
		}
	}
	return n, true
}
