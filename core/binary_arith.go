package core

import "math/bits"

// The arithmetic of binary fills on their hot path: shares are whole, so a
// notional is a plain product (no 10^scale division), and a fee's product
// fits in 64 bits for every notional below binFastFee (the common case), so
// the 128-bit division of mulDiv is skipped. Results equal notional(p, q, 0)
// and feeOf(n, rate) exactly (binary_arith_test.go).

// binFastFee bounds the notionals whose fee product n x rate fits in int64
// for every rate <= MaxFeeRate.
const binFastFee = Units(1<<63-1) / Units(MaxFeeRate)

// binNotional is price x qty, and false on overflow.
func binNotional(price Price, qty Units) (Units, bool) {
	if price < 0 || qty < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(price), uint64(qty))
	if hi != 0 || lo > 1<<63-1 {
		return 0, false
	}
	return Units(lo), true
}

// binFee is floor(n x rate / 10^6), as feeOf.
func binFee(n Units, rate Rate) Units {
	if n >= 0 && n <= binFastFee && rate >= 0 && rate <= MaxFeeRate {
		return n * Units(rate) / Units(RateDenominator)
	}
	return feeOf(n, rate)
}

// binaryHold is what a BUY of qty shares at its own price holds: the
// notional plus the worst-case fee (floor, like every fee).
func binaryHold(price Price, qty Units, rate Rate) (Units, bool) {
	n, ok := binNotional(price, qty)
	if !ok {
		return 0, false
	}
	return addUnits(n, binFee(n, rate))
}
