package gateway

import (
	"math"
	"strconv"
)

// Limits of the decimal grammar.
const (
	// MaxScale is the largest scale ParseUnits and FormatUnits accept: 10^18 is
	// the largest power of ten that fits in int64. Equal to core.MaxBaseScale;
	// a bigger scale is a configuration bug, so it panics rather than rejects.
	MaxScale = 18
	// MaxDecimalLen is the longest string, in bytes, ParseUnits reads. The
	// longest canonical form (FormatUnits) is 21 bytes; the rest is room for
	// trailing zeros a client's fixed-width formatter may add.
	MaxDecimalLen = 64
)

// ParseUnits parses a positive decimal string into integer units at scale, so
// "1.5" at scale 8 is 150_000_000. It does not allocate on valid input.
//
// Grammar (anything else is INVALID_AMOUNT "not a decimal number"):
//
//	amount = [ "-" ] int [ "." frac ]
//	int    = "0" | nonzero-digit { digit }   ; no leading zeros: "00.5", "01" rejected
//	frac   = digit { digit }                 ; no ".5", no "5.", no exponent, '+' or spaces
//
// "-" is read only so that a negative gets INVALID_AMOUNT instead of a syntax
// message. Trailing zeros in frac beyond scale are allowed because they do not
// change the value ("1.2300" at scale 2 is 123 units); a non-zero digit beyond
// scale is not.
//
// Checks run in this order and the first failure wins:
//
//  1. length > MaxDecimalLen, or the grammar above  → 400 INVALID_AMOUNT
//  2. a non-zero digit beyond scale                 → 400 PRECISION_OVERFLOW
//  3. |value| × 10^scale > math.MaxInt64            → 400 OVERFLOW
//  4. value <= 0 (including "-0" and "0.00")        → 400 INVALID_AMOUNT
//
// So "-1.234" at scale 2 is PRECISION_OVERFLOW and "-9223372036854775808" at
// scale 0 is OVERFLOW: the magnitude is judged first, the sign last.
//
// ParseUnits panics if scale > MaxScale (the program is wrong, not the user).
func ParseUnits(s string, scale uint8) (int64, error) {
	if scale > MaxScale {
		panic("gateway: ParseUnits scale " + strconv.Itoa(int(scale)) + " > MaxScale")
	}
	if len(s) > MaxDecimalLen {
		return 0, BadRequest(CodeInvalidAmount, "amount is longer than "+strconv.Itoa(MaxDecimalLen)+" characters")
	}
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	intPart, frac, ok := splitDecimal(s)
	if !ok {
		return 0, BadRequest(CodeInvalidAmount, "amount is not a decimal number")
	}
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	if len(frac) > int(scale) {
		return 0, BadRequest(CodePrecisionOverflow, "amount has more than "+strconv.Itoa(int(scale))+" decimal places")
	}
	v, ok := accumulate(0, intPart)
	if ok {
		v, ok = accumulate(v, frac)
	}
	for i := len(frac); ok && i < int(scale); i++ {
		v, ok = accumulate(v, "0")
	}
	if !ok {
		return 0, BadRequest(CodeOverflow, "amount is too large")
	}
	if neg || v == 0 {
		return 0, BadRequest(CodeInvalidAmount, "amount must be positive")
	}
	return v, nil
}

// splitDecimal checks the unsigned grammar and returns the integer digits and
// the fraction digits (empty when there is no point).
func splitDecimal(s string) (intPart, frac string, ok bool) {
	dot := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && dot < 0:
			dot = i
		default:
			return "", "", false
		}
	}
	intPart = s
	if dot >= 0 {
		intPart, frac = s[:dot], s[dot+1:]
		if len(frac) == 0 {
			return "", "", false
		}
	}
	if len(intPart) == 0 || (len(intPart) > 1 && intPart[0] == '0') {
		return "", "", false
	}
	return intPart, frac, true
}

// accumulate appends the decimal digits of ds to v, reporting false as soon as
// the result would exceed math.MaxInt64. ds holds only '0'..'9'.
func accumulate(v int64, ds string) (int64, bool) {
	for i := 0; i < len(ds); i++ {
		d := int64(ds[i] - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// FormatUnits is the canonical string of v units at scale: exactly scale
// decimals, no exponent, a leading '-' for negatives, e.g. FormatUnits(150, 2)
// is "1.50" and FormatUnits(5, 0) is "5". Fixed width (not trimmed) keeps the
// scale visible to clients, as exchange APIs conventionally do. For v > 0,
// ParseUnits(FormatUnits(v, scale), scale) == v. Panics if scale > MaxScale.
func FormatUnits(v int64, scale uint8) string {
	var buf [formatBufLen]byte
	return string(AppendUnits(buf[:0], v, scale))
}

// formatBufLen bounds FormatUnits' output: '-', 19 digits (int64 magnitude, and
// MaxScale+1 = 19 when padding), '.'.
const formatBufLen = 1 + 19 + 1

// AppendUnits appends FormatUnits(v, scale) to dst; it does not allocate when
// dst has room, so response encoders can use it on the hot path.
func AppendUnits(dst []byte, v int64, scale uint8) []byte {
	if scale > MaxScale {
		panic("gateway: AppendUnits scale " + strconv.Itoa(int(scale)) + " > MaxScale")
	}
	var buf [formatBufLen]byte
	u := uint64(v)
	if v < 0 {
		u = -u // two's complement: also right for math.MinInt64
	}
	i := len(buf)
	for n := 0; n < int(scale); n++ {
		i--
		buf[i] = byte('0' + u%10)
		u /= 10
	}
	if scale > 0 {
		i--
		buf[i] = '.'
	}
	for {
		i--
		buf[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			break
		}
	}
	if v < 0 {
		i--
		buf[i] = '-'
	}
	return append(dst, buf[i:]...)
}
