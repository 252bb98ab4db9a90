package ulid

// ULIDs are valid, 26 characters, and strictly increasing from one
// generator, also within one millisecond and with a clock stepping back.

import (
	"testing"
	"time"
)

func TestULIDMonotonic(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	g := &Gen{now: func() time.Time { return now }}
	prev := ""
	for i := 0; i < 10_000; i++ {
		if i == 5000 {
			now = now.Add(-time.Second) // clock steps back: still increasing
		}
		id, err := g.New()
		if err != nil {
			t.Fatal(err)
		}
		if !Valid(id) || id <= prev {
			t.Fatalf("id %d: %q after %q", i, id, prev)
		}
		prev = id
	}
	if got := encode(1<<48-1, [10]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); got != "7ZZZZZZZZZZZZZZZZZZZZZZZZZ" {
		t.Fatalf("max ULID = %q", got)
	}
	if got := encode(0, [10]byte{9: 1}); got != "00000000000000000000000001" {
		t.Fatalf("ULID 1 = %q", got)
	}
	g2 := NewGen()
	id, _ := g2.New()
	ms := time.Now().UnixMilli()
	var v int64
	for _, c := range id[:10] {
		for j := 0; j < 32; j++ {
			if crockford[j] == byte(c) {
				v = v*32 + int64(j)
			}
		}
	}
	if v > ms || ms-v > 1000 {
		t.Fatalf("timestamp part %d, now %d", v, ms)
	}
}
