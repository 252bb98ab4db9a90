package logging

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// fastJSON is the JSON handler of NewBufferedHandler. For the common record
// — built-in keys, then attributes that are strings, integers, bools or
// durations — it writes the very bytes slog.JSONHandler with ReplaceAttr
// would write (fastjson_test.go compares them), without slog's generic
// machinery (handle state, per-attribute ReplaceAttr calls, buffer pool).
// Any other record goes to that slog.JSONHandler, as does every handler
// derived with WithAttrs or WithGroup.
//
// Why: spec 003 §4.3 logs an INFO line per created and per completed
// transfer; slog's JSON handler cost ~1 µs of CPU a line, about 10 % of the
// exchange's CPU under bench p2p.
//
// It writes each line with one Write to a Buffered (safe for concurrent
// use, lines kept whole), so it needs no mutex of its own.
type fastJSON struct {
	w    *Buffered
	slow slog.Handler // NewHandler(w, false)
}

func newFastJSON(b *Buffered) *fastJSON {
	return &fastJSON{w: b, slow: NewHandler(b, false)}
}

func (h *fastJSON) Enabled(ctx context.Context, l slog.Level) bool { return h.slow.Enabled(ctx, l) }

func (h *fastJSON) WithAttrs(as []slog.Attr) slog.Handler { return h.slow.WithAttrs(as) }

func (h *fastJSON) WithGroup(name string) slog.Handler { return h.slow.WithGroup(name) }

var fastBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (h *fastJSON) Handle(ctx context.Context, r slog.Record) error {
	bp := fastBufs.Get().(*[]byte)
	b, ok := appendFastRecord((*bp)[:0], &r)
	var err error
	if ok {
		_, err = h.w.Write(b)
	} else {
		err = h.slow.Handle(ctx, r)
	}
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		fastBufs.Put(bp)
	}
	return err
}

// appendFastRecord appends r as slog.JSONHandler with ReplaceAttr prints
// it, or reports false if r has anything the fast path does not print.
func appendFastRecord(b []byte, r *slog.Record) ([]byte, bool) {
	b = append(b, '{')
	if !r.Time.IsZero() {
		var ok bool
		if b, ok = appendTime(b, r.Time); !ok {
			return b, false // slog appends an error text
		}
	}
	b = append(b, `"level":`...)
	if r.Level == LevelCritical {
		b = appendJSONString(b, CriticalName)
	} else {
		b = appendJSONString(b, r.Level.String())
	}
	b = append(b, `,"msg":`...)
	b = appendJSONString(b, r.Message)
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		b, ok = appendFastAttr(b, a)
		return ok
	})
	if !ok {
		return b, false
	}
	return append(b, '}', '\n'), true
}

// appendFastAttr appends ,"key":value for the kinds the fast path prints
// (after ReplaceAttr: durations as their String), else reports false.
func appendFastAttr(b []byte, a slog.Attr) ([]byte, bool) {
	if a.Key == "" || a.Key == slog.LevelKey {
		return b, false // slog elides or replaces some of these: leave them to it
	}
	b = append(b, ',')
	b = appendJSONString(b, a.Key)
	b = append(b, ':')
	v := a.Value
	switch v.Kind() {
	case slog.KindString:
		b = appendJSONString(b, v.String())
	case slog.KindInt64:
		b = strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		b = strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindBool:
		b = strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		b = appendJSONString(b, v.Duration().String())
	case slog.KindAny:
		d, ok := v.Any().(time.Duration)
		if !ok {
			return b, false
		}
		b = appendJSONString(b, d.String())
	default:
		return b, false
	}
	return b, true
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted and escaped exactly as slog's JSON
// handler does (encoding/json's rules without HTML escaping: ", \ and
// control characters escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029
// escaped).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// secondText is t's RFC 3339 text without the fraction, split around it:
// `"time":"2026-11-26T23:24:07` and `Z",` (or the zone's offset). Zone
// offsets change only at whole seconds, so it holds for every instant of
// that second in that location.
type secondText struct {
	sec          int64
	loc          *time.Location
	prefix, zone []byte
	ok           bool // the year is in [0, 9999]
}

// lastSecond caches the text of the latest second logged (lines come in
// bursts within one second; t.AppendFormat is most of a line's cost).
var lastSecond atomic.Pointer[secondText]

// appendTime appends `"time":"<t.Round(0) as time.RFC3339Nano>",`, or
// reports false if t's year is outside [0, 9999].
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	t = t.Round(0)
	sec, loc := t.Unix(), t.Location()
	st := lastSecond.Load()
	if st == nil || st.sec != sec || st.loc != loc {
		st = newSecondText(t.Truncate(time.Second), sec, loc)
		lastSecond.Store(st)
	}
	if !st.ok {
		return b, false
	}
	b = append(b, st.prefix...)
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i >= 1; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, st.zone...), true
}

func newSecondText(t time.Time, sec int64, loc *time.Location) *secondText {
	st := &secondText{sec: sec, loc: loc}
	if y := t.Year(); y < 0 || y >= 10000 {
		return st
	}
	st.ok = true
	full := t.AppendFormat(nil, time.RFC3339) // whole second: no fraction
	i := 19                                   // len("2006-01-02T15:04:05")
	st.prefix = append([]byte(`"time":"`), full[:i]...)
	st.zone = append(append([]byte(nil), full[i:]...), '"', ',')
	return st
}
