package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	r := walTestRand(t)
	buf := make([]byte, 0, 4096)
	for i := 0; i < 1000; i++ {
		seq := r.Uint64()
		payload := make([]byte, r.IntN(300))
		for j := range payload {
			payload[j] = byte(r.Uint32())
		}
		buf = AppendEnvelope(buf[:0], seq, payload)
		if len(buf) != EnvelopeSize(len(payload)) {
			t.Fatalf("size %d, want %d", len(buf), EnvelopeSize(len(payload)))
		}
		gotSeq, got, err := DecodeEnvelope(buf)
		if err != nil || gotSeq != seq || !bytes.Equal(got, payload) {
			t.Fatalf("decode: %d %x %v", gotSeq, got, err)
		}
		// Every single-bit flip is detected.
		bit := r.IntN(len(buf) * 8)
		buf[bit/8] ^= 1 << (bit % 8)
		if _, _, err := DecodeEnvelope(buf); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d flipped: err %v", bit, err)
		}
	}
}

func TestEnvelopeErrors(t *testing.T) {
	env := AppendEnvelope(nil, 42, []byte("hello"))
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrEnvelopeShort},
		{"short header", env[:15], ErrEnvelopeShort},
		{"truncated payload", env[:len(env)-1], ErrEnvelopeLength},
		{"trailing byte", append(append([]byte(nil), env...), 0), ErrEnvelopeLength},
		{"bad crc", func() []byte { b := bytes.Clone(env); b[12] ^= 1; return b }(), ErrEnvelopeChecksum},
		{"bad seq", func() []byte { b := bytes.Clone(env); b[0] ^= 1; return b }(), ErrEnvelopeChecksum},
	}
	for _, c := range cases {
		_, _, err := DecodeEnvelope(c.b)
		if err != c.want || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
		var ee *EnvelopeError
		if !errors.As(err, &ee) || ee.Reason() == "" {
			t.Errorf("%s: not an *EnvelopeError", c.name)
		}
	}
	// Empty payload is valid.
	e0 := AppendEnvelope(nil, 7, nil)
	if seq, p, err := DecodeEnvelope(e0); err != nil || seq != 7 || len(p) != 0 {
		t.Fatalf("empty payload: %d %v %v", seq, p, err)
	}
}

func TestEnvelopeNoAllocs(t *testing.T) {
	buf := make([]byte, 0, 256)
	payload := make([]byte, 64)
	if a := testing.AllocsPerRun(100, func() {
		buf = AppendEnvelope(buf[:0], 9, payload)
		if _, _, err := DecodeEnvelope(buf); err != nil {
			t.Fatal(err)
		}
		_, _, _ = DecodeEnvelope(buf[:10])
	}); a != 0 {
		t.Fatalf("%v allocs", a)
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(AppendEnvelope(nil, 1, []byte("payload")))
	f.Add(AppendEnvelope(nil, 0, nil))
	f.Add(AppendEnvelopeBatchEnd(nil, 3, []byte("end")))
	f.Add(AppendEnvelope(nil, ^uint64(0), bytes.Repeat([]byte{0xAB}, 200)))
	valid := AppendEnvelope(nil, 12345, []byte("0123456789"))
	for _, n := range []int{0, 1, 8, 12, 15, 16, 17, len(valid) - 1} {
		f.Add(bytes.Clone(valid[:n]))
	}
	maxLen := make([]byte, 16)
	binary.LittleEndian.PutUint32(maxLen[8:], 0xFFFFFFFF)
	f.Add(maxLen)
	zeroLen := make([]byte, 20)
	f.Add(zeroLen)
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, payload, err := DecodeEnvelope(b)
		if err != nil {
			var ee *EnvelopeError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ee) || payload != nil || seq != 0 {
				t.Fatalf("bad error result: %d %v %v", seq, payload, err)
			}
			return
		}
		// Accepted: must be exactly the encoding of (seq, payload).
		if len(b) != EnvelopeHeaderSize+len(payload) {
			t.Fatalf("accepted %d bytes for a %d-byte payload", len(b), len(payload))
		}
		re := AppendEnvelope(nil, seq, payload)
		if EnvelopeEndsBatch(b) {
			re = AppendEnvelopeBatchEnd(nil, seq, payload)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("accepted a non-canonical envelope: %x vs %x", b, re)
		}
		if len(payload) > 0 && &payload[0] != &b[EnvelopeHeaderSize] {
			t.Fatal("payload is not a sub-slice of the input")
		}
	})
}
