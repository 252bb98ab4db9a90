package core

import "math"

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
	fieldCount
)

// MaxCommandSize bounds an encoded command.
const MaxCommandSize = 2 + 10 + 10 + 4 + 7*1 + 3*10 + 2*5 + 4*10 + 33 + 2*5 + 1 + 6*10

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
	return w.b
}

// DecodeCommand decodes b into c. It rejects (with an error wrapping
// ErrDecode) unknown versions and kinds, truncation, trailing bytes,
// non-minimal varints, present-but-zero fields and out-of-range ids; it never
// panics. c is fully overwritten.
func DecodeCommand(b []byte, c *Command) error {
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
	if r.err != nil || len(r.b) != 0 {
		*c = Command{}
		return ErrDecode
	}
	return nil
}
