package main

import (
	"strconv"
	"unicode/utf8"
)

// jsonObj appends one JSON object field by field, without reflection: dump
// writes millions of lines. Numeric fields at zero are omitted (in the core
// an absent field is a zero field); use the *Always forms where zero means
// something (a fee account id, a scale of 0).
type jsonObj struct {
	b     []byte
	first bool
}

func (j *jsonObj) open() {
	j.b = append(j.b, '{')
	j.first = true
}

func (j *jsonObj) close() { j.b = append(j.b, '}') }

func (j *jsonObj) key(k string) {
	if !j.first {
		j.b = append(j.b, ',')
	}
	j.first = false
	j.b = append(j.b, '"')
	j.b = append(j.b, k...)
	j.b = append(j.b, '"', ':')
}

func (j *jsonObj) int(k string, v int64) {
	if v != 0 {
		j.intAlways(k, v)
	}
}

func (j *jsonObj) intAlways(k string, v int64) {
	j.key(k)
	j.b = strconv.AppendInt(j.b, v, 10)
}

func (j *jsonObj) uint(k string, v uint64) {
	if v != 0 {
		j.uintAlways(k, v)
	}
}

func (j *jsonObj) uintAlways(k string, v uint64) {
	j.key(k)
	j.b = strconv.AppendUint(j.b, v, 10)
}

func (j *jsonObj) str(k, v string) {
	j.key(k)
	j.b = appendJSONString(j.b, v)
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
			i++
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			i++
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
		}
	}
	return append(b, '"')
}
