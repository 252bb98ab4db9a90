package gateway

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"
)

// The transport edge: the fasthttp.Server settings that go with Handler,
// errors fasthttp raises before the handler runs, and reading the body
// within MaxBodyBytes.

const (
	// MaxDrainBytes: a body over the limit is read and discarded up to this
	// many bytes, so that the 413 reaches the client on an open connection
	// (a server that stops reading and closes makes most clients see a
	// reset instead of the answer). Beyond it the connection is closed.
	// Draining costs bandwidth and time (bounded by the read timeout), not
	// memory.
	MaxDrainBytes = 8 << 20
)

// HTTPServer returns a fasthttp.Server running Handler with this server's
// limits: bodies are streamed, so at most MaxBodyBytes of one is held in
// memory (a longer one is answered 413 BODY_TOO_LARGE after draining up to
// MaxDrainBytes); headers must fit an 8 KiB read buffer (room for a
// MaxAuthHeaderLen token); slow or idle clients are cut off. The handler
// also works on a server without streaming (it then checks the buffered
// body's length).
func (s *Server) HTTPServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                      s.Handler(),
		ErrorHandler:                 s.ErrorHandler,
		Name:                         "ubscore",
		StreamRequestBody:            true,
		MaxRequestBodySize:           s.maxBody,
		ReadBufferSize:               8 << 10,
		ReadTimeout:                  10 * time.Second,
		WriteTimeout:                 10 * time.Second,
		IdleTimeout:                  60 * time.Second,
		DisablePreParseMultipartForm: true,
		NoDefaultContentType:         true,
	}
}

// ErrorHandler answers requests fasthttp could not read, in the API's
// error format (use it as fasthttp.Server.ErrorHandler).
func (s *Server) ErrorHandler(ctx *fasthttp.RequestCtx, err error) {
	var e *APIError
	var small *fasthttp.ErrSmallBuffer
	var timeout interface{ Timeout() bool }
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = errBodyTooLarge
	case errors.As(err, &small):
		e = &APIError{Status: http.StatusRequestHeaderFieldsTooLarge, Code: CodeHeaderTooLarge, Message: "request headers are too large"}
	case errors.As(err, &timeout) && timeout.Timeout():
		e = &APIError{Status: http.StatusRequestTimeout, Code: CodeRequestTimeout, Message: "request not received in time"}
	default:
		e = BadRequest(CodeBadRequest, "malformed HTTP request")
	}
	st := s.states.Get().(*reqState)
	s.fail(ctx, st, e)
	s.states.Put(st)
	if s.obs != nil {
		s.obs.Observe(routeUnmatched, e.Status, 0)
	}
}

var errBodyTooLarge = &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeBodyTooLarge,
	Message: "request body is too large"}

// readBody sets st.body to the request body, or answers 413 for one longer
// than maxBody. A streamed body (fasthttp.Server.StreamRequestBody) is read
// here, never more than maxBody+1 bytes into memory; the excess is drained
// (up to MaxDrainBytes) so the connection stays usable for the answer.
func (s *Server) readBody(ctx *fasthttp.RequestCtx, st *reqState) *APIError {
	req := &ctx.Request
	cl := req.Header.ContentLength() // -1 chunked, -2 none
	if !req.IsBodyStream() || (cl >= 0 && cl <= s.maxBody) {
		st.body = req.Body() // buffered, or bounded by Content-Length
		if len(st.body) > s.maxBody {
			return errBodyTooLarge
		}
		return nil
	}
	if cl > s.maxBody+MaxDrainBytes {
		ctx.SetConnectionClose()
		return errBodyTooLarge
	}
	r := req.BodyStream()
	b := st.bodyBuf[:0]
	for len(b) <= s.maxBody {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):min(cap(b), s.maxBody+1)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			ctx.SetConnectionClose()
			return BadRequest(CodeBadRequest, "could not read the request body")
		}
	}
	st.bodyBuf = b
	if len(b) > s.maxBody {
		if n, _ := io.CopyN(io.Discard, r, MaxDrainBytes); n == MaxDrainBytes {
			ctx.SetConnectionClose()
		}
		return errBodyTooLarge
	}
	st.body = b
	return nil
}
