package core

// CommandVersion is the first byte of every encoded command.
//
// Encoding (version 1), all integers varint (u = unsigned, s = zig-zag signed):
//
//	+---------+------+--------+---------+-------------+--------------------------+
//	| version | kind | seq(u) | time(s) | present(u)  | present fields, bit order |
//	+---------+------+--------+---------+-------------+--------------------------+
//
// A field is present iff it is non-zero, so each command has exactly one
// encoding (decode(encode(c)) == c and encode(decode(b)) == b). Key fields are
// a length byte (1..32) and the key's bytes up to its last non-zero byte.
// Text (the last field, operator commands only) is a uvarint length
// (1..MaxTextLen) and that many bytes; WAL entries written before it existed
// never set its bit, so they decode unchanged.
const CommandVersion = 1

// field bits, in encoding order.
const (
	fSide = iota
	fType
	fTIF
	fSTP
	fStatus
	fFlags
	fBaseScale
	fUser
	fMarket
	fAsset
	fOrderID
	fPrice
	fQty
	fQuoteQty
	fAmount
	fKey
	fCfgBase
	fCfgQuote
	fCfgScale
	fCfgTick
	fCfgLot
	fCfgMin
	fCfgMax
	fCfgMaker
	fCfgTaker
	fText
	fieldCount
)

// MaxCommandSize bounds an encoded command.
const MaxCommandSize = 2 + 10 + 10 + 4 + 7*1 + 3*10 + 2*5 + 4*10 + 33 + 2*5 + 1 + 6*10 + 2 + MaxTextLen

// EncodeCommand appends the canonical encoding of c to dst.
func EncodeCommand(dst []byte, c *Command) []byte {
	w := wbuf{b: dst}
	w.u8(CommandVersion)
	w.u8(uint8(c.Kind))
	w.uv(uint64(c.Seq))
	w.sv(c.Time)
	var present uint64
	u8s := [...]uint8{uint8(c.Side), uint8(c.Type), uint8(c.TIF), uint8(c.STP), uint8(c.Status), c.Flags, c.BaseScale}
	for i, v := range u8s {
		if v != 0 {
			present |= 1 << i
		}
	}
	uvs := [...]uint64{uint64(c.User), uint64(c.Market), uint64(c.Asset), uint64(c.OrderID)}
	for i, v := range uvs {
		if v != 0 {
			present |= 1 << (fUser + i)
		}
	}
	svs := [...]int64{int64(c.Price), int64(c.Qty), int64(c.QuoteQty), int64(c.Amount)}
	for i, v := range svs {
		if v != 0 {
			present |= 1 << (fPrice + i)
		}
	}
	if !c.Key.IsZero() {
		present |= 1 << fKey
	}
	cf := &c.Cfg
	cfgU := [...]uint64{uint64(cf.Base), uint64(cf.Quote), uint64(cf.BaseScale)}
	for i, v := range cfgU {
		if v != 0 {
			present |= 1 << (fCfgBase + i)
		}
	}
	cfgS := [...]int64{int64(cf.Tick), int64(cf.Lot), int64(cf.MinQty), int64(cf.MaxQty), int64(cf.MakerFee), int64(cf.TakerFee)}
	for i, v := range cfgS {
		if v != 0 {
			present |= 1 << (fCfgTick + i)
		}
	}
	if c.Text != "" {
		present |= 1 << fText
	}
	w.uv(present)
	for i, v := range u8s {
		if present&(1<<i) != 0 {
			w.u8(v)
		}
	}
	for i, v := range uvs {
		if present&(1<<(fUser+i)) != 0 {
			w.uv(v)
		}
	}
	for i, v := range svs {
		if present&(1<<(fPrice+i)) != 0 {
			w.sv(v)
		}
	}
	if present&(1<<fKey) != 0 {
		w.key(c.Key)
	}
	for i, v := range cfgU {
		if present&(1<<(fCfgBase+i)) != 0 {
			w.uv(v)
		}
	}
	for i, v := range cfgS {
		if present&(1<<(fCfgTick+i)) != 0 {
			w.sv(v)
		}
	}
	if present&(1<<fText) != 0 {
		w.uv(uint64(len(c.Text)))
		w.raw([]byte(c.Text))
	}
	return w.b
}

// DecodeCommand decodes b into c. It rejects (with an error wrapping
// ErrDecode) unknown versions and kinds, truncation, trailing bytes,
// non-minimal varints, present-but-zero fields and out-of-range ids; it never
// panics. c is fully overwritten (zeroed on error). It accepts exactly the
// encodings EncodeCommand produces (codec_ref_test.go checks it against a
// plain reference decoder); it is written for the replay path, which decodes
// every WAL entry: an index into b instead of re-slicing, one-byte varints
// on a fast path, and no closures.
func DecodeCommand(b []byte, c *Command) error {
	*c = Command{}
	if len(b) < 2 || b[0] != CommandVersion || b[1] == 0 || Kind(b[1]) > kindMax {
		return ErrDecode
	}
	d := cmdDecoder{b: b, i: 2}
	seq := d.uv()
	t := d.sv()
	present := d.uv()
	if d.bad || present>>fieldCount != 0 {
		return ErrDecode
	}
	c.Kind, c.Seq, c.Time = Kind(b[1]), Seq(seq), t
	if present&(1<<fUser-1) != 0 { // the one-byte fields, bits fSide..fBaseScale
		d.u8Fields(c, present)
	}
	if present&(1<<fUser) != 0 {
		c.User = UserID(d.nzUv())
	}
	if present&(1<<fMarket) != 0 {
		c.Market = MarketID(d.nzUv32())
	}
	if present&(1<<fAsset) != 0 {
		c.Asset = AssetID(d.nzUv32())
	}
	if present&(1<<fOrderID) != 0 {
		c.OrderID = OrderID(d.nzUv())
	}
	if present&(1<<fPrice) != 0 {
		c.Price = Price(d.nzSv())
	}
	if present&(1<<fQty) != 0 {
		c.Qty = Units(d.nzSv())
	}
	if present&(1<<fQuoteQty) != 0 {
		c.QuoteQty = Units(d.nzSv())
	}
	if present&(1<<fAmount) != 0 {
		c.Amount = Units(d.nzSv())
	}
	if present&(1<<fKey) != 0 {
		d.key(&c.Key)
	}
	if present>>fCfgBase&(1<<(fText-fCfgBase)-1) != 0 {
		d.cfgFields(&c.Cfg, present)
	}
	if present&(1<<fText) != 0 {
		c.Text = d.text()
	}
	if d.bad || d.i != len(b) {
		*c = Command{}
		return ErrDecode
	}
	return nil
}

// cmdDecoder reads b from i on. The first failure sets bad; reads after it
// return zero and the result is discarded.
type cmdDecoder struct {
	b   []byte
	i   int
	bad bool
}

// uv reads a minimal unsigned varint.
func (d *cmdDecoder) uv() uint64 {
	if d.i < len(d.b) && d.b[d.i] < 0x80 {
		v := uint64(d.b[d.i])
		d.i++
		return v
	}
	return d.uvSlow()
}

// uvSlow reads a varint of two or more bytes. It is minimal iff its last
// byte is non-zero; a tenth byte may only be 1 (a larger one overflows).
func (d *cmdDecoder) uvSlow() uint64 {
	var v uint64
	for k := 0; k < 10; k++ {
		if d.i >= len(d.b) {
			break
		}
		x := d.b[d.i]
		d.i++
		if x < 0x80 {
			if (k > 0 && x == 0) || (k == 9 && x > 1) {
				break
			}
			return v | uint64(x)<<(7*k)
		}
		v |= uint64(x&0x7f) << (7 * k)
	}
	d.bad = true
	return 0
}

// sv reads a minimal zig-zag signed varint.
func (d *cmdDecoder) sv() int64 {
	ux := d.uv()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (d *cmdDecoder) nzUv() uint64 {
	v := d.uv()
	if v == 0 {
		d.bad = true
	}
	return v
}

// nzUv32 reads a non-zero varint that must fit in 32 bits.
func (d *cmdDecoder) nzUv32() uint32 {
	v := d.uv()
	if v == 0 || v > 1<<32-1 {
		d.bad = true
	}
	return uint32(v)
}

func (d *cmdDecoder) nzSv() int64 {
	v := d.sv()
	if v == 0 {
		d.bad = true
	}
	return v
}

// nzU8 reads one raw byte that must be non-zero.
func (d *cmdDecoder) nzU8() uint8 {
	if d.i >= len(d.b) || d.b[d.i] == 0 {
		d.bad = true
		return 0
	}
	v := d.b[d.i]
	d.i++
	return v
}

// u8Fields reads the one-byte fields present (bits fSide..fBaseScale).
func (d *cmdDecoder) u8Fields(c *Command, present uint64) {
	if present&(1<<fSide) != 0 {
		c.Side = Side(d.nzU8())
	}
	if present&(1<<fType) != 0 {
		c.Type = OrderType(d.nzU8())
	}
	if present&(1<<fTIF) != 0 {
		c.TIF = TimeInForce(d.nzU8())
	}
	if present&(1<<fSTP) != 0 {
		c.STP = STP(d.nzU8())
	}
	if present&(1<<fStatus) != 0 {
		c.Status = AccountStatus(d.nzU8())
	}
	if present&(1<<fFlags) != 0 {
		c.Flags = d.nzU8()
	}
	if present&(1<<fBaseScale) != 0 {
		c.BaseScale = d.nzU8()
	}
}

// key reads a key: a length 1..32 and that many bytes, the last non-zero
// (trailing zeros are implied, so a zero last byte is not minimal and a
// zero length would be an absent key marked present).
func (d *cmdDecoder) key(k *Key) {
	if d.i >= len(d.b) {
		d.bad = true
		return
	}
	n := int(d.b[d.i])
	if n == 0 || n > len(k) || len(d.b)-d.i-1 < n || d.b[d.i+n] == 0 {
		d.bad = true
		return
	}
	copy(k[:], d.b[d.i+1:d.i+1+n])
	d.i += 1 + n
}

// text reads Text: a length 1..MaxTextLen and that many bytes.
func (d *cmdDecoder) text() string {
	n := d.uv()
	if d.bad || n == 0 || n > MaxTextLen || uint64(len(d.b)-d.i) < n {
		d.bad = true
		return ""
	}
	s := string(d.b[d.i : d.i+int(n)])
	d.i += int(n)
	return s
}

// cfgFields reads the market config fields present (KindConfigMarket).
func (d *cmdDecoder) cfgFields(cf *MarketCfg, present uint64) {
	if present&(1<<fCfgBase) != 0 {
		cf.Base = AssetID(d.nzUv32())
	}
	if present&(1<<fCfgQuote) != 0 {
		cf.Quote = AssetID(d.nzUv32())
	}
	if present&(1<<fCfgScale) != 0 {
		v := d.nzUv()
		if v > 1<<8-1 {
			d.bad = true
		}
		cf.BaseScale = uint8(v)
	}
	sv := [...]*int64{(*int64)(&cf.Tick), (*int64)(&cf.Lot), (*int64)(&cf.MinQty), (*int64)(&cf.MaxQty),
		(*int64)(&cf.MakerFee), (*int64)(&cf.TakerFee)}
	for i, p := range sv {
		if present&(1<<(fCfgTick+i)) != 0 {
			*p = d.nzSv()
		}
	}
}
