package gateway

import (
	"unicode/utf16"
	"unicode/utf8"
)

// MaxJSONFields bounds the members of a request object. Every schema has at
// most this many fields, and the decoder stops at the first unknown or
// repeated member, so no accepted object has more members than its schema.
const MaxJSONFields = 12 // 9 in POST /order (outcome, binary markets) and in the binary-market create

// jsonKind is the JSON type a schema field must have.
type jsonKind uint8

const (
	jsonString jsonKind = iota + 1 // a JSON string
	jsonNumber                     // a JSON number (ids, counts, limits; never money); the handler checks its form
	// jsonMoney is every money field outside spec 003's paths (amounts,
	// prices, quantities, payouts, wei): a decimal string only. A JSON
	// number, or any other type, is 400 INVALID_FIELD_TYPE "field X must be
	// a decimal string" here, before the handler runs: floats are not money,
	// and this is the one check every such endpoint shares
	// (TestMoneyFieldsRefuseNumbers finds every schema's money fields).
	jsonMoney
	// jsonP2PAmount is an amount of spec 003's own paths, which take JSON
	// numbers: a number in any JSON form (exponent included) or a string,
	// kept as its text; any other value (true, [1], {}) is kept as its raw
	// text too, so that the handler answers the spec's format error
	// (INVALID_BALANCE, INVALID_AMOUNT) and not INVALID_FIELD_TYPE.
	jsonP2PAmount
	jsonBool // true or false (v.b is the literal)

	// jsonNullable, or'ed into a kind, reads null as absent (v.set false,
	// v.null true): spec 003's paths, where a required field given as null
	// is MISSING_FIELD. Elsewhere null is INVALID_FIELD_TYPE.
	jsonNullable jsonKind = 0x80
)

// jsonField is one member of a request schema.
type jsonField struct {
	name string
	kind jsonKind
}

// jsonValue is a decoded member: the string's contents (unescaped) or the
// number's text. b aliases the body or the scratch buffer of the request.
type jsonValue struct {
	set  bool
	null bool // given as null (a jsonNullable field only; set is false)
	b    []byte
}

// decodeObject reads body as exactly one JSON object (RFC 8259, UTF-8,
// surrounding whitespace allowed) whose members are all in schema, each at
// most once and of its kind, into vals (indexed like schema). It is strict:
//
//	not one well-formed object, bad UTF-8, trailing data → 400 INVALID_JSON
//	a member not in schema                            → 400 UNKNOWN_FIELD
//	a member twice                                    → 400 DUPLICATE_FIELD
//	a value of another JSON type (null included)      → 400 INVALID_FIELD_TYPE
//	  (a number for a jsonMoney field included; null for a jsonNullable one is absent)
//
// The first problem from the left wins. Unescaped strings are written to
// scratch, which is grown once to len(body) so earlier values never move; it
// returns scratch for reuse. It does not allocate when scratch is big enough.
// Messages name the schema field, never echo the input.
func decodeObject(body []byte, schema []jsonField, vals []jsonValue, scratch []byte) ([]byte, *APIError) {
	if len(schema) > MaxJSONFields || len(vals) < len(schema) {
		panic("gateway: schema larger than MaxJSONFields")
	}
	clear(vals)
	if cap(scratch) < len(body) {
		scratch = make([]byte, 0, len(body))
	}
	s := jsonScanner{b: body, out: scratch[:0]}
	s.ws()
	if !s.eat('{') {
		return scratch, errJSON("body must be a JSON object")
	}
	s.ws()
	if s.eat('}') {
		return scratch, s.end()
	}
	for {
		if s.peek() != '"' {
			return scratch, errJSON("expected a member name")
		}
		key, ok := s.str()
		if !ok {
			return scratch, errJSON("malformed string")
		}
		s.ws()
		if !s.eat(':') {
			return scratch, errJSON("expected ':' after a member name")
		}
		k := fieldIndex(schema, key)
		if k < 0 {
			return scratch, BadRequest(CodeUnknownField, "the request has a field this endpoint does not define")
		}
		if vals[k].set || vals[k].null {
			return scratch, BadRequest(CodeDuplicateField, "field "+schema[k].name+" appears more than once")
		}
		s.ws()
		if err := s.value(schema[k], &vals[k]); err != nil {
			return scratch, err
		}
		s.ws()
		if s.eat('}') {
			return scratch, s.end()
		}
		if !s.eat(',') {
			return scratch, errJSON("expected ',' or '}' after a member")
		}
		s.ws()
	}
}

func errJSON(msg string) *APIError { return BadRequest(CodeInvalidJSON, "invalid JSON: "+msg) }

func fieldIndex(schema []jsonField, key []byte) int {
	for i := range schema {
		if string(key) == schema[i].name {
			return i
		}
	}
	return -1
}

// jsonScanner walks one request body.
type jsonScanner struct {
	b   []byte
	i   int
	out []byte // unescaped string contents; cap >= len(b), never reallocated
}

func (s *jsonScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *jsonScanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end checks that only whitespace follows the object.
func (s *jsonScanner) end() *APIError {
	s.ws()
	if s.i != len(s.b) {
		return errJSON("data after the JSON object")
	}
	return nil
}

// value reads one member value of field f into v.
func (s *jsonScanner) value(f jsonField, v *jsonValue) *APIError {
	kind := f.kind &^ jsonNullable
	c := s.peek()
	switch {
	case c == 'n' && f.kind&jsonNullable != 0:
		if !s.lit("null") {
			return errJSON("malformed literal")
		}
		v.null = true
		return nil
	case c == '"':
		if kind == jsonString || kind == jsonMoney || kind == jsonP2PAmount {
			b, ok := s.str()
			if !ok {
				return errJSON("malformed string")
			}
			v.set, v.b = true, b
			return nil
		}
	case kind == jsonP2PAmount:
		start := s.i
		if err := s.skip(0); err != nil {
			return err
		}
		v.set, v.b = true, s.b[start:s.i]
		return nil
	case c == '-' || c >= '0' && c <= '9':
		if kind == jsonNumber {
			b, ok := s.number()
			if !ok {
				return errJSON("malformed number")
			}
			v.set, v.b = true, b
			return nil
		}
	case (c == 't' || c == 'f') && kind == jsonBool:
		start := s.i
		if !s.lit("true") && !s.lit("false") {
			return errJSON("malformed literal")
		}
		v.set, v.b = true, s.b[start:s.i]
		return nil
	case c == '{' || c == '[' || c == 't' || c == 'f' || c == 'n':
	default:
		return errJSON("expected a value")
	}
	want := "a string"
	switch kind {
	case jsonNumber:
		want = "a number"
	case jsonMoney:
		want = "a decimal string"
	case jsonBool:
		want = "true or false"
	}
	return BadRequest(CodeInvalidFieldType, "field "+f.name+" must be "+want)
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() ([]byte, bool) {
	start := s.i
	s.eat('-')
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return nil, false
	}
	if s.eat('.') && !s.digits() {
		return nil, false
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return nil, false
		}
	}
	return s.b[start:s.i], true
}

// digits consumes [0-9]* and reports whether there was at least one.
func (s *jsonScanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// str reads a JSON string at s.i (which is '"') and returns its contents:
// a slice of the body when there is no escape, else of s.out.
func (s *jsonScanner) str() ([]byte, bool) {
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\':
			return s.strSlow(start)
		case c < 0x20:
			return nil, false
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				return nil, false
			}
			s.i += n
		}
	}
	return nil, false
}

// strSlow unescapes the rest of a string whose contents start at start.
func (s *jsonScanner) strSlow(start int) ([]byte, bool) {
	o := len(s.out)
	s.out = append(s.out, s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.out[o:len(s.out):len(s.out)], true
		case c == '\\':
			if !s.escape() {
				return nil, false
			}
		case c < 0x20:
			return nil, false
		case c < utf8.RuneSelf:
			s.out = append(s.out, c)
			s.i++
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				return nil, false
			}
			s.out = append(s.out, s.b[s.i:s.i+n]...)
			s.i += n
		}
	}
	return nil, false
}

// escape decodes one escape sequence at s.i (a backslash). A lone UTF-16
// surrogate becomes U+FFFD, as encoding/json does. The output is never
// longer than the input sequence, so s.out never outgrows cap(len(body)).
func (s *jsonScanner) escape() bool {
	if s.i+1 >= len(s.b) {
		return false
	}
	c := s.b[s.i+1]
	s.i += 2
	switch c {
	case '"', '\\', '/':
		s.out = append(s.out, c)
	case 'b':
		s.out = append(s.out, '\b')
	case 'f':
		s.out = append(s.out, '\f')
	case 'n':
		s.out = append(s.out, '\n')
	case 'r':
		s.out = append(s.out, '\r')
	case 't':
		s.out = append(s.out, '\t')
	case 'u':
		r, ok := s.hex4()
		if !ok {
			return false
		}
		if utf16.IsSurrogate(r) {
			r2 := utf8.RuneError
			if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
				save := s.i
				s.i += 2
				if lo, ok := s.hex4(); ok {
					if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
						r2 = d
					} else {
						s.i = save // not a pair: the second escape stands alone
					}
				} else {
					return false
				}
			}
			r = r2
		}
		s.out = utf8.AppendRune(s.out, r)
	default:
		return false
	}
	return true
}

func (s *jsonScanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}
