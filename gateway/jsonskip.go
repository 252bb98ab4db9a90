package gateway

// maxJSONDepth bounds the nesting skip reads: only spec 003's amounts skip
// a value (one whose type is wrong, kept as text for the spec's format
// error), so a legitimate value is never nested at all.
const maxJSONDepth = 32

// lit consumes the literal l (true, false, null) if it is next.
func (s *jsonScanner) lit(l string) bool {
	if len(s.b)-s.i >= len(l) && string(s.b[s.i:s.i+len(l)]) == l {
		s.i += len(l)
		return true
	}
	return false
}

// skip reads one JSON value of any type, checking its syntax (RFC 8259),
// nested at most maxJSONDepth deep. Strings inside it are unescaped into
// s.out like any other, which stays within its capacity (len(body)).
func (s *jsonScanner) skip(depth int) *APIError {
	if depth > maxJSONDepth {
		return errJSON("value nested too deep")
	}
	switch c := s.peek(); {
	case c == '"':
		if _, ok := s.str(); !ok {
			return errJSON("malformed string")
		}
	case c == '-' || c >= '0' && c <= '9':
		if _, ok := s.number(); !ok {
			return errJSON("malformed number")
		}
	case c == 't' || c == 'f' || c == 'n':
		if !s.lit("true") && !s.lit("false") && !s.lit("null") {
			return errJSON("malformed literal")
		}
	case c == '[':
		return s.skipSeq(depth, ']', false)
	case c == '{':
		return s.skipSeq(depth, '}', true)
	default:
		return errJSON("expected a value")
	}
	return nil
}

// skipSeq reads an array (members false) or an object after its opening
// bracket at s.i, up to and including end.
func (s *jsonScanner) skipSeq(depth int, end byte, members bool) *APIError {
	s.i++
	s.ws()
	if s.eat(end) {
		return nil
	}
	for {
		if members {
			if s.peek() != '"' {
				return errJSON("expected a member name")
			}
			if _, ok := s.str(); !ok {
				return errJSON("malformed string")
			}
			s.ws()
			if !s.eat(':') {
				return errJSON("expected ':' after a member name")
			}
			s.ws()
		}
		if err := s.skip(depth + 1); err != nil {
			return err
		}
		s.ws()
		if s.eat(end) {
			return nil
		}
		if !s.eat(',') {
			return errJSON("expected ',' or '" + string(end) + "'")
		}
		s.ws()
	}
}
