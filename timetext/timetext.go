// Package timetext appends instants as RFC 3339 text, byte for byte what
// time.Time.AppendFormat(b, time.RFC3339Nano) writes, at a fraction of its
// cost: the text of the whole second is cached, so the instants of one
// second (a burst of answers, events or log lines) append only their
// fraction. Safe for concurrent use.
package timetext

import (
	"sync/atomic"
	"time"
)

// second is the text of one whole UTC second, "2006-01-02T15:04:05".
type second struct {
	sec  int64 // unix seconds
	text [19]byte
}

// lastUTC caches the latest second appended by AppendUTC.
var lastUTC atomic.Pointer[second]

// AppendUTC appends the instant ns (unix nanoseconds) in UTC as
// time.Unix(0, ns).UTC().AppendFormat(b, time.RFC3339Nano) does:
// "2006-01-02T15:04:05.999999999Z", the fraction without trailing zeros
// and absent when zero. Every int64 is a year in [1677, 2262], so there is
// no out-of-range case.
func AppendUTC(b []byte, ns int64) []byte {
	sec, frac := ns/1e9, ns%1e9
	if frac < 0 { // floor, not truncation, for instants before 1970
		sec, frac = sec-1, frac+1e9
	}
	st := lastUTC.Load()
	if st == nil || st.sec != sec {
		st = &second{sec: sec}
		time.Unix(sec, 0).UTC().AppendFormat(st.text[:0], "2006-01-02T15:04:05")
		lastUTC.Store(st)
	}
	b = append(b, st.text[:]...)
	b = AppendFraction(b, int(frac))
	return append(b, 'Z')
}

// AppendFraction appends ns (0 <= ns < 1e9) as RFC3339Nano's fraction:
// "." and up to nine digits without trailing zeros; nothing when ns is 0.
func AppendFraction(b []byte, ns int) []byte {
	if ns == 0 {
		return b
	}
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
	return append(b, frac[:n]...)
}
