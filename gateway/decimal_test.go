package gateway

// These tests prove that ParseUnits accepts exactly the documented grammar,
// applies its four checks in the documented order, is exact at the int64 edge
// for every scale 0..MaxScale and does not allocate on valid input.

import (
	"flag"
	"math"
	"strings"
	"testing"
	"time"
)

var flagSeed = flag.Uint64("gateway.seed", 0, "seed of the randomized gateway tests (0: random)")

// seed returns the seed to use and logs it so a failure can be replayed.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := *flagSeed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with: go test ./gateway -run '^%s$' -gateway.seed %d", t.Name(), s)
		}
	})
	return s
}

type parseCase struct {
	in    string
	scale uint8
	want  int64  // when code == ""
	code  string // expected APIError code, "" for success
}

func checkParse(t *testing.T, c parseCase) {
	t.Helper()
	got, err := ParseUnits(c.in, c.scale)
	if c.code == "" {
		if err != nil || got != c.want {
			t.Errorf("ParseUnits(%q, %d) = %d, %v; want %d", c.in, c.scale, got, err, c.want)
		}
		return
	}
	e, ok := AsAPIError(err)
	if !ok || e.Code != c.code || e.Status != 400 || got != 0 {
		t.Errorf("ParseUnits(%q, %d) = %d, %v; want code %s", c.in, c.scale, got, err, c.code)
	}
}

func TestParseUnitsTable(t *testing.T) {
	long := "1." + strings.Repeat("0", MaxDecimalLen-2)
	for _, c := range []parseCase{
		// valid
		{"1", 0, 1, ""},
		{"1.5", 1, 15, ""},
		{"1.5", 8, 150_000_000, ""},
		{"0.5", 1, 5, ""},
		{"10", 2, 1000, ""},
		{"0.00000001", 8, 1, ""},
		{"1.2300", 2, 123, ""}, // zeros beyond scale are harmless
		{"5.0", 0, 5, ""},
		{"5.000", 0, 5, ""},
		{"0.10", 1, 1, ""},
		{long, 0, 1, ""}, // exactly MaxDecimalLen bytes
		{"1000000000000000000", 0, 1e18, ""},
		// grammar → INVALID_AMOUNT
		{"", 2, 0, CodeInvalidAmount},
		{"-", 2, 0, CodeInvalidAmount},
		{".", 2, 0, CodeInvalidAmount},
		{"..", 2, 0, CodeInvalidAmount},
		{".5", 2, 0, CodeInvalidAmount},
		{"5.", 2, 0, CodeInvalidAmount},
		{"-.5", 2, 0, CodeInvalidAmount},
		{"1..2", 2, 0, CodeInvalidAmount},
		{"1.2.3", 2, 0, CodeInvalidAmount},
		{"+1", 2, 0, CodeInvalidAmount},
		{"--1", 2, 0, CodeInvalidAmount},
		{"-+1", 2, 0, CodeInvalidAmount},
		{" 1", 2, 0, CodeInvalidAmount},
		{"1 ", 2, 0, CodeInvalidAmount},
		{"1\n", 2, 0, CodeInvalidAmount},
		{"1\x00", 2, 0, CodeInvalidAmount},
		{"1e5", 2, 0, CodeInvalidAmount},
		{"1E5", 2, 0, CodeInvalidAmount},
		{"1.5e-1", 2, 0, CodeInvalidAmount},
		{"0x10", 2, 0, CodeInvalidAmount},
		{"1_000", 2, 0, CodeInvalidAmount},
		{"1,5", 2, 0, CodeInvalidAmount},
		{"١", 2, 0, CodeInvalidAmount}, // Arabic-Indic digit one
		{"NaN", 2, 0, CodeInvalidAmount},
		{"Inf", 2, 0, CodeInvalidAmount},
		{"-Inf", 2, 0, CodeInvalidAmount},
		{"00", 2, 0, CodeInvalidAmount},
		{"01", 2, 0, CodeInvalidAmount},
		{"00.5", 2, 0, CodeInvalidAmount},
		{"-01", 2, 0, CodeInvalidAmount},
		{"1" + long, 0, 0, CodeInvalidAmount}, // MaxDecimalLen+1 bytes
		{"1" + strings.Repeat("9", 1000), 0, 0, CodeInvalidAmount},
		// precision → PRECISION_OVERFLOW
		{"1.234", 2, 0, CodePrecisionOverflow},
		{"0.1", 0, 0, CodePrecisionOverflow},
		{"0.000000001", 8, 0, CodePrecisionOverflow},
		{"1.0000000000000000001", 18, 0, CodePrecisionOverflow},
		{"1.2301", 2, 0, CodePrecisionOverflow},
		// sign and zero → INVALID_AMOUNT
		{"0", 0, 0, CodeInvalidAmount},
		{"0.00", 2, 0, CodeInvalidAmount},
		{"0.0000", 2, 0, CodeInvalidAmount},
		{"-0", 0, 0, CodeInvalidAmount},
		{"-1", 0, 0, CodeInvalidAmount},
		{"-0.01", 2, 0, CodeInvalidAmount},
		// overflow
		{"9999999999999999999", 0, 0, CodeOverflow}, // 19 digits > MaxInt64
		{"10000000000000000000", 0, 0, CodeOverflow},
		{"1000000000000000000", 1, 0, CodeOverflow}, // 10^19 units
		{"1", 18, 1e18, ""},                         // scale 18: 10^18 fits
		{"10", 18, 0, CodeOverflow},
		// the documented order: precision before overflow before sign
		{"99999999999999999999.999", 2, 0, CodePrecisionOverflow},
		{"-1.234", 2, 0, CodePrecisionOverflow},
		{"-99999999999999999999", 0, 0, CodeOverflow},
		{"-9223372036854775808", 0, 0, CodeOverflow}, // |MinInt64| > MaxInt64
		{"-9223372036854775807", 0, 0, CodeInvalidAmount},
	} {
		checkParse(t, c)
	}
}

// maxPlusOne is MaxInt64+1 = 9223372036854775808, as a digit string.
const maxPlusOne = "9223372036854775808"

// placePoint puts a decimal point scale digits from the right of digits
// (which has more than scale digits).
func placePoint(digits string, scale int) string {
	if scale == 0 {
		return digits
	}
	return digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
}

func TestParseUnitsInt64EdgeEveryScale(t *testing.T) {
	for s := 0; s <= MaxScale; s++ {
		sc := uint8(s)
		max := FormatUnits(math.MaxInt64, sc)
		if want := placePoint("9223372036854775807", s); max != want {
			t.Fatalf("FormatUnits(MaxInt64, %d) = %q, want %q", s, max, want)
		}
		zeros := max + "0"
		if s == 0 {
			zeros = max + ".0"
		}
		smallest := "1"
		if s > 0 {
			smallest = "0." + strings.Repeat("0", s-1) + "1"
		}
		intMax := math.MaxInt64 / pow10(s) // largest whole number that fits
		for _, c := range []parseCase{
			{max, sc, math.MaxInt64, ""},
			{zeros, sc, math.MaxInt64, ""},
			{"-" + max, sc, 0, CodeInvalidAmount},
			{placePoint(maxPlusOne, s), sc, 0, CodeOverflow},
			{"-" + placePoint(maxPlusOne, s), sc, 0, CodeOverflow},
			{placePoint("9999999999999999999", s), sc, 0, CodeOverflow},
			{placePoint("10000000000000000000", s), sc, 0, CodeOverflow},
			{smallest, sc, 1, ""},
			{"0." + strings.Repeat("0", s) + "1", sc, 0, CodePrecisionOverflow},
			{max + "1", sc, 0, overflowOrPrecision(s)},
			{FormatUnits(intMax, 0), sc, intMax * pow10(s), ""},
			{FormatUnits(intMax+1, 0), sc, 0, CodeOverflow},
		} {
			checkParse(t, c)
		}
	}
}

// overflowOrPrecision is the code for MaxInt64's string with one more digit: a
// 20-digit integer at scale 0, one decimal too many otherwise.
func overflowOrPrecision(scale int) string {
	if scale == 0 {
		return CodeOverflow
	}
	return CodePrecisionOverflow
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

func TestParseUnitsScaleAboveMaxPanics(t *testing.T) {
	for _, f := range []func(){
		func() { _, _ = ParseUnits("1", MaxScale+1) },
		func() { _ = FormatUnits(1, MaxScale+1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("scale > MaxScale did not panic")
				}
			}()
			f()
		}()
	}
}

func TestParseUnitsZeroAllocs(t *testing.T) {
	inputs := []struct {
		s     string
		scale uint8
	}{
		{"1", 0}, {"1.5", 8}, {"9.223372036854775807", 18}, {"0.00000001", 8},
		{"1.2300000000", 2}, {"123456789.12345678", 8},
	}
	allocs := testing.AllocsPerRun(1000, func() {
		for _, in := range inputs {
			if _, err := ParseUnits(in.s, in.scale); err != nil {
				panic(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("ParseUnits allocates %.1f times per run on valid input", allocs)
	}
	buf := make([]byte, 0, 64)
	allocs = testing.AllocsPerRun(1000, func() {
		buf = AppendUnits(buf[:0], math.MinInt64, 18)
	})
	if allocs != 0 {
		t.Fatalf("AppendUnits allocates %.1f times per run with room in dst", allocs)
	}
}

func BenchmarkParseUnits(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseUnits("123456789.12345678", 8); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendUnits(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 32)
	for b.Loop() {
		buf = AppendUnits(buf[:0], 12345678912345678, 8)
	}
}
