package core

// codec_ref_test.go keeps the first, plain DecodeCommand (closures, one
// reader for every field) as a reference: FuzzDecodeCommandRef and
// TestDecodeCommandMatchesRef check that the replay-tuned decoder accepts
// exactly what it accepts and decodes the same command.

import (
	"bytes"
	"math"
	"testing"
)

// decodeCommandRef decodes b into c. It rejects (with an error wrapping
// ErrDecode) unknown versions and kinds, truncation, trailing bytes,
// non-minimal varints, present-but-zero fields and out-of-range ids; it never
// panics. c is fully overwritten.
func decodeCommandRef(b []byte, c *Command) error {
	*c = Command{}
	r := rbuf{b: b}
	if r.u8() != CommandVersion {
		return ErrDecode
	}
	c.Kind = Kind(r.u8())
	if c.Kind == 0 || c.Kind > kindMax {
		return ErrDecode
	}
	c.Seq = Seq(r.uv())
	c.Time = r.sv()
	present := r.uv()
	if present>>fieldCount != 0 {
		return ErrDecode
	}
	has := func(bit int) bool { return present&(1<<bit) != 0 }
	nz := func(v uint64) {
		if v == 0 {
			r.fail()
		}
	}
	u8p := [...]*uint8{(*uint8)(&c.Side), (*uint8)(&c.Type), (*uint8)(&c.TIF), (*uint8)(&c.STP),
		(*uint8)(&c.Status), &c.Flags, &c.BaseScale}
	for i, p := range u8p {
		if has(i) {
			*p = r.u8()
			nz(uint64(*p))
		}
	}
	var u [4]uint64
	for i := range u {
		if has(fUser + i) {
			u[i] = r.uv()
			nz(u[i])
		}
	}
	if u[1] > math.MaxUint32 || u[2] > math.MaxUint32 {
		return ErrDecode
	}
	c.User, c.Market, c.Asset, c.OrderID = UserID(u[0]), MarketID(u[1]), AssetID(u[2]), OrderID(u[3])
	var s [4]int64
	for i := range s {
		if has(fPrice + i) {
			s[i] = r.sv()
			nz(uint64(s[i]))
		}
	}
	c.Price, c.Qty, c.QuoteQty, c.Amount = Price(s[0]), Units(s[1]), Units(s[2]), Units(s[3])
	if has(fKey) {
		c.Key = r.key()
		if c.Key.IsZero() {
			r.fail()
		}
	}
	var cu [3]uint64
	for i := range cu {
		if has(fCfgBase + i) {
			cu[i] = r.uv()
			nz(cu[i])
		}
	}
	if cu[0] > math.MaxUint32 || cu[1] > math.MaxUint32 || cu[2] > math.MaxUint8 {
		return ErrDecode
	}
	c.Cfg.Base, c.Cfg.Quote, c.Cfg.BaseScale = AssetID(cu[0]), AssetID(cu[1]), uint8(cu[2])
	var cs [6]int64
	for i := range cs {
		if has(fCfgTick + i) {
			cs[i] = r.sv()
			nz(uint64(cs[i]))
		}
	}
	c.Cfg.Tick, c.Cfg.Lot, c.Cfg.MinQty, c.Cfg.MaxQty = Price(cs[0]), Units(cs[1]), Units(cs[2]), Units(cs[3])
	c.Cfg.MakerFee, c.Cfg.TakerFee = Rate(cs[4]), Rate(cs[5])
	if has(fText) {
		n := r.uv()
		if n == 0 || n > MaxTextLen || n > uint64(len(r.b)) {
			return ErrDecode
		}
		c.Text = string(r.b[:n])
		r.b = r.b[n:]
	}
	if r.err != nil || len(r.b) != 0 {
		*c = Command{}
		return ErrDecode
	}
	return nil
}

// checkDecodeAgainstRef decodes b with both decoders and fails on any difference.
func checkDecodeAgainstRef(t *testing.T, b []byte) {
	t.Helper()
	var got, want Command
	gotErr, wantErr := DecodeCommand(b, &got), decodeCommandRef(b, &want)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("input %x: DecodeCommand err %v, reference err %v", b, gotErr, wantErr)
	}
	if wantErr == nil && got != want {
		t.Fatalf("input %x:\n got  %+v\n want %+v", b, got, want)
	}
	if gotErr != nil && got != (Command{}) {
		t.Fatalf("input %x: rejected but left %+v", b, got)
	}
}

// TestDecodeCommandMatchesRef runs the decoders on every command of a
// random stream, on each of its prefixes and on single-byte mutations.
func TestDecodeCommandMatchesRef(t *testing.T) {
	cmds := genCommands(3, 3000)
	cmds = append(cmds, boundaryCommands()...)
	for i := range cmds {
		b := EncodeCommand(nil, &cmds[i])
		checkDecodeAgainstRef(t, b)
		for n := 0; n < len(b); n++ {
			checkDecodeAgainstRef(t, b[:n])
		}
		if i%5 != 0 {
			continue
		}
		for pos := 0; pos < len(b); pos++ {
			for _, x := range []byte{0, 1, 0x7f, 0x80, 0xff, b[pos] ^ 1} {
				m := bytes.Clone(b)
				m[pos] = x
				checkDecodeAgainstRef(t, m)
			}
		}
	}
	for _, b := range decodeSeeds() {
		checkDecodeAgainstRef(t, b)
	}
}

// FuzzDecodeCommandRef: on any input the two decoders agree.
func FuzzDecodeCommandRef(f *testing.F) {
	for _, b := range decodeSeeds() {
		f.Add(b)
	}
	f.Fuzz(checkDecodeAgainstRef)
}
