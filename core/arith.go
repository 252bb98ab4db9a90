package core

import "math/bits"

// pow10 holds 10^0 .. 10^18 (all fit in int64).
var pow10 = func() (p [MaxBaseScale + 1]uint64) {
	p[0] = 1
	for i := 1; i <= MaxBaseScale; i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// addUnits returns a+b, or 0 and false on int64 overflow. The sum
// overflowed iff it differs in sign from both operands: one well-predicted
// branch instead of two on the signs of the operands.
func addUnits(a, b Units) (Units, bool) {
	s := a + b
	if (a^s)&(b^s) < 0 {
		return 0, false
	}
	return s, true
}

// mulDiv returns floor(a*b/d) for non-negative a, b and d > 0 using a 128-bit
// intermediate; ok is false if the result does not fit in int64.
func mulDiv(a, b, d int64) (int64, bool) {
	if a < 0 || b < 0 || d <= 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(d) {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, uint64(d))
	if q > 1<<63-1 {
		return 0, false
	}
	return int64(q), true
}

// notional is the quote amount of qty base Units at price (exact when the
// market's tick*lot is a multiple of 10^scale, which ConfigMarket enforces).
func notional(price Price, qty Units, scale uint8) (Units, bool) {
	if scale == 0 && price >= 0 && qty >= 0 {
		// mulDiv by 1 without the 128-by-64 division: the product fits
		// iff its high word is 0 and its low word is an int64.
		hi, lo := bits.Mul64(uint64(price), uint64(qty))
		if hi != 0 || lo > 1<<63-1 {
			return 0, false
		}
		return Units(lo), true
	}
	n, ok := mulDiv(int64(price), int64(qty), int64(pow10[scale]))
	return Units(n), ok
}

// feeOf is floor(n * rate / 10^6). It never overflows for rate <= MaxFeeRate.
func feeOf(n Units, rate Rate) Units {
	if n >= 0 && rate >= 0 {
		// mulDiv's result when the product fits in 64 bits, dividing by
		// the constant (a multiply and a shift, not a DIV).
		if hi, lo := bits.Mul64(uint64(n), uint64(rate)); hi == 0 {
			return Units(lo / uint64(RateDenominator))
		}
	}
	f, _ := mulDiv(int64(n), int64(rate), int64(RateDenominator))
	return Units(f)
}

// withFee is n plus the fee at rate, and false on overflow.
func withFee(n Units, rate Rate) (Units, bool) {
	return addUnits(n, feeOf(n, rate))
}
