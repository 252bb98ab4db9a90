package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
)

// Append-style JSON writers for responses. Every response is a small,
// fixed-shape object, so writing it by hand into a reused buffer costs no
// allocation (encoding/json would reflect and allocate per field).

const hexDigits = "0123456789abcdef"

// appendStr appends s as a JSON string. Control characters, '"', '\\' and
// '<', '>', '&' (HTML-safe, as encoding/json) are escaped; invalid UTF-8
// becomes U+FFFD, so the output is always valid JSON.
func appendStr(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			dst = appendASCII(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

// AppendJSONString is appendStr for the other packages that write JSON by
// hand (the WebSocket streams): one escaper for every answer.
func AppendJSONString(dst []byte, s string) []byte { return appendStr(dst, s) }

// appendStrBytes is appendStr for a byte slice.
func appendStrBytes(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			dst = appendASCII(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

func appendASCII(dst []byte, c byte) []byte {
	switch {
	case c == '"' || c == '\\':
		return append(dst, '\\', c)
	case c < 0x20 || c == '<' || c == '>' || c == '&':
		return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
	}
	return append(dst, c)
}

// appendClientID appends a client order id or ref, or null if it is absent.
func appendClientID(dst []byte, k *core.Key) []byte {
	n := 0
	for n < len(k) && k[n] != 0 {
		n++
	}
	if n == 0 {
		return append(dst, "null"...)
	}
	return appendStrBytes(dst, k[:n])
}

// appendKey appends `"name":` (name is a literal of ours: no escaping).
func appendKey(dst []byte, name string) []byte {
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// appendUnitsStr appends v at scale as a JSON string ("1.50000000").
func appendUnitsStr(dst []byte, v int64, scale uint8) []byte {
	dst = append(dst, '"')
	dst = AppendUnits(dst, v, scale)
	return append(dst, '"')
}

// appendUnitsOrNull is appendUnitsStr, or null for 0 (a price or quantity
// that does not apply or is not known).
func appendUnitsOrNull(dst []byte, v int64, scale uint8) []byte {
	if v == 0 {
		return append(dst, "null"...)
	}
	return appendUnitsStr(dst, v, scale)
}

// appendNameOrNull appends name as a JSON string, or null if it is empty.
func appendNameOrNull(dst []byte, name string) []byte {
	if name == "" {
		return append(dst, "null"...)
	}
	return appendStr(dst, name)
}

func appendUint(dst []byte, v uint64) []byte { return strconv.AppendUint(dst, v, 10) }

// appendError appends the error body {"code":..., "message":...}.
func appendError(dst []byte, e *APIError) []byte {
	dst = append(dst, '{')
	dst = appendKey(dst, "code")
	dst = appendStr(dst, e.Code)
	dst = append(dst, ',')
	dst = appendKey(dst, "message")
	dst = appendStr(dst, e.Message)
	return append(dst, '}')
}

// statusName is an order status in the API; "" (written as null) if absent.
func statusName(s core.OrderStatus) string {
	if s >= core.StatusNew && s <= core.StatusRejected {
		return s.String()
	}
	return ""
}

// replyJSON answers v with encoding/json: for the cold paths (admin, chain,
// breaker endpoints); the hot paths write their JSON by hand.
func (s *Server) replyJSON(ctx *fasthttp.RequestCtx, st *reqState, status int, v any) *APIError {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("gateway: encode answer", "err", err)
		return &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
	}
	st.out = append(st.out[:0], b...)
	s.reply(ctx, st, status)
	return nil
}
