// Package ulid makes and checks ULIDs, the req_ids of internal transfers.
package ulid

import (
	"crypto/rand"
	"fmt"
	"sync"
	"time"
)

// ULID: 48-bit Unix time in ms, then 80 random bits, as 26 Crockford base32
// characters (lexicographic order == time order). Within one millisecond the
// random part is incremented, so ids from one generator strictly increase.

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// Gen makes monotonic ULIDs; safe for concurrent use.
type Gen struct {
	mu     sync.Mutex
	lastMS uint64
	rnd    [10]byte // the last random part
	now    func() time.Time
}

// NewGen returns a generator on the wall clock.
func NewGen() *Gen { return &Gen{now: time.Now} }

// New returns the next ULID.
func (g *Gen) New() (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := uint64(g.now().UnixMilli())
	if ms <= g.lastMS { // same ms, or the clock stepped back: keep increasing
		ms = g.lastMS
		if !increment(&g.rnd) {
			ms++ // 2^80 ids in one ms: borrow the next ms
			if _, err := rand.Read(g.rnd[:]); err != nil {
				return "", fmt.Errorf("ulid: random: %w", err)
			}
		}
	} else if _, err := rand.Read(g.rnd[:]); err != nil {
		return "", fmt.Errorf("ulid: random: %w", err)
	}
	if ms >= 1<<48 {
		return "", fmt.Errorf("ulid: time overflow")
	}
	g.lastMS = ms
	return encode(ms, g.rnd), nil
}

// increment adds 1 to the big-endian 80-bit value; false on wrap-around.
func increment(b *[10]byte) bool {
	for i := len(b) - 1; i >= 0; i-- {
		b[i]++
		if b[i] != 0 {
			return true
		}
	}
	return false
}

func encode(ms uint64, rnd [10]byte) string {
	var raw [16]byte
	for i := 0; i < 6; i++ {
		raw[i] = byte(ms >> (40 - 8*i))
	}
	copy(raw[6:], rnd[:])
	// 128 bits as 26 five-bit groups; the first group holds the top 3 bits.
	var out [26]byte
	hi := uint64(raw[0])<<56 | uint64(raw[1])<<48 | uint64(raw[2])<<40 | uint64(raw[3])<<32 |
		uint64(raw[4])<<24 | uint64(raw[5])<<16 | uint64(raw[6])<<8 | uint64(raw[7])
	lo := uint64(raw[8])<<56 | uint64(raw[9])<<48 | uint64(raw[10])<<40 | uint64(raw[11])<<32 |
		uint64(raw[12])<<24 | uint64(raw[13])<<16 | uint64(raw[14])<<8 | uint64(raw[15])
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// Valid reports whether s is 26 Crockford base32 characters whose value
// fits 128 bits (first character at most '7').
func Valid(s string) bool {
	if len(s) != 26 || s[0] > '7' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U') {
			return false
		}
	}
	return true
}
