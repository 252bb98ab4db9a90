package model

import (
	"strconv"
	"strings"

	"github.com/ubscore/ubscore/core"
)

// SafetyFactor bounds a single transfer far below the int64 range of Units
// (spec 1.5.3 "amount <= u64::MAX / safety_factor"), so sums of many
// transfers stay representable.
const SafetyFactor = 1000

// MaxTransferUnits is the largest amount, in units, a transfer may carry
// whatever the asset's own maximum.
const MaxTransferUnits = core.MaxUnits / SafetyFactor

// MaxPrecision is the largest asset precision (decimal places) supported.
const MaxPrecision = 18

// decimalAmount is a syntactically valid decimal string split into parts.
type decimalAmount struct {
	neg      bool
	intPart  string // digits, leading zeros removed
	fracPart string // digits, trailing zeros removed
}

// parseDecimal accepts [-]digits[.digits]; ok is false for anything else
// (empty, exponent, '+', spaces, a bare '.'), which is a format error.
func parseDecimal(s string) (d decimalAmount, ok bool) {
	if len(s) > 0 && s[0] == '-' {
		d.neg, s = true, s[1:]
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return d, false
	}
	intPart, frac := s[:i], ""
	if i < len(s) {
		if s[i] != '.' {
			return d, false
		}
		frac = s[i+1:]
		if frac == "" {
			return d, false
		}
		for j := 0; j < len(frac); j++ {
			if frac[j] < '0' || frac[j] > '9' {
				return d, false
			}
		}
	}
	for len(intPart) > 1 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	d.intPart, d.fracPart = intPart, frac
	return d, true
}

// zero reports whether the value is 0.
func (d decimalAmount) zero() bool { return d.intPart == "0" && d.fracPart == "" }

// units converts to asset units at the given precision (which must cover
// fracPart); ok is false when the value exceeds limit.
func (d decimalAmount) units(precision int, limit Units) (Units, bool) {
	var v Units
	digits := d.intPart + d.fracPart
	for i := len(d.fracPart); i < precision; i++ {
		digits += "0"
	}
	for i := 0; i < len(digits); i++ {
		c := Units(digits[i] - '0')
		if v > (limit-c)/10 {
			return 0, false
		}
		v = v*10 + c
	}
	return v, true
}

// FormatUnits renders units at precision as a decimal string without
// trailing fraction zeros (150000000 at 8 -> "1.5").
func FormatUnits(u Units, precision int) string {
	sign := ""
	n := uint64(u)
	if u < 0 {
		sign, n = "-", uint64(-u)
	}
	s := strconv.FormatUint(n, 10)
	if precision <= 0 {
		return sign + s
	}
	for len(s) <= precision {
		s = "0" + s
	}
	ip, fp := s[:len(s)-precision], strings.TrimRight(s[len(s)-precision:], "0")
	if fp == "" {
		return sign + ip
	}
	return sign + ip + "." + fp
}
