package core

import (
	"encoding/binary"
	"errors"
)

// ErrDecode is returned (wrapped) for any malformed command or snapshot.
var ErrDecode = errors.New("core: malformed input")

// wbuf appends canonical little-endian / varint encodings.
type wbuf struct {
	b []byte
	// yield, if set, is called by pace once every paceBytes of output: a
	// long serialization lets its caller's other work run (the state
	// follower shares the Ps with the pipeline). It must not touch the
	// processor being serialized.
	yield func()
	next  int // pace's next yield, at this length of b
}

// paceBytes is how much output a paced serialization writes between
// yields (about 100-300 µs of work).
const paceBytes = 64 << 10

// pace calls yield once another paceBytes of output are written.
func (w *wbuf) pace() {
	if w.yield != nil && len(w.b) >= w.next {
		w.next = len(w.b) + paceBytes
		w.yield()
	}
}

func (w *wbuf) u8(v uint8)   { w.b = append(w.b, v) }
func (w *wbuf) uv(v uint64)  { w.b = binary.AppendUvarint(w.b, v) }
func (w *wbuf) sv(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *wbuf) u64(v uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *wbuf) raw(v []byte) { w.b = append(w.b, v...) }

// key writes the bytes up to the last non-zero one (interior zeros kept, so
// a non-canonical key round-trips unchanged and is rejected identically on
// replay).
func (w *wbuf) key(k Key) {
	n := len(k)
	for n > 0 && k[n-1] == 0 {
		n--
	}
	w.u8(uint8(n))
	w.raw(k[:n])
}

// rbuf decodes what wbuf wrote, rejecting truncation and non-minimal varints.
// The first error sticks; later reads return zero.
type rbuf struct {
	b   []byte
	err error
}

func (r *rbuf) fail() {
	if r.err == nil {
		r.err = ErrDecode
	}
	r.b = nil
}

func (r *rbuf) u8() uint8 {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *rbuf) uv() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || n != uvarintLen(v) {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rbuf) sv() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	ux := uint64(v) << 1
	if v < 0 {
		ux = ^ux
	}
	if n != uvarintLen(ux) {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rbuf) u64() uint64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *rbuf) key() (k Key) {
	n := int(r.u8())
	if n > len(k) || len(r.b) < n {
		r.fail()
		return k
	}
	copy(k[:], r.b[:n])
	if n > 0 && k[n-1] == 0 {
		r.fail() // not minimal: trailing zeros are implied
		return Key{}
	}
	r.b = r.b[n:]
	return k
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
