package gateway

// This file checks ParseUnits against a deliberately naive reference (a regular
// expression and math/big, no overflow tricks) on fuzzed and random strings.

import (
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

var refGrammar = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// refParseUnits is the documented contract written the slow, obvious way.
func refParseUnits(s string, scale uint8) (int64, error) {
	if len(s) > MaxDecimalLen || !refGrammar.MatchString(s) {
		return 0, BadRequest(CodeInvalidAmount, "")
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	frac = strings.TrimRight(frac, "0")
	if len(frac) > int(scale) {
		return 0, BadRequest(CodePrecisionOverflow, "")
	}
	v, _ := new(big.Int).SetString(whole+frac+strings.Repeat("0", int(scale)-len(frac)), 10)
	if v.Cmp(big.NewInt(math.MaxInt64)) > 0 {
		return 0, BadRequest(CodeOverflow, "")
	}
	if neg || v.Sign() == 0 {
		return 0, BadRequest(CodeInvalidAmount, "")
	}
	return v.Int64(), nil
}

func codeOf(err error) string {
	if e, ok := AsAPIError(err); ok {
		return e.Code
	}
	if err != nil {
		return "non-API error: " + err.Error()
	}
	return ""
}

// checkAgainstRef is the fuzz property: no panic, same result as the
// reference, and an accepted value survives Format → Parse.
func checkAgainstRef(t *testing.T, s string, scale uint8) {
	t.Helper()
	got, err := ParseUnits(s, scale)
	want, werr := refParseUnits(s, scale)
	if codeOf(err) != codeOf(werr) || got != want {
		t.Fatalf("ParseUnits(%q, %d) = %d, %v; reference %d, %v", s, scale, got, err, want, werr)
	}
	if err != nil {
		return
	}
	f := FormatUnits(got, scale)
	if back, err := ParseUnits(f, scale); err != nil || back != got {
		t.Fatalf("ParseUnits(%q) = %d but ParseUnits(FormatUnits = %q) = %d, %v", s, got, f, back, err)
	}
}

func FuzzParseUnits(f *testing.F) {
	for _, s := range []string{
		"", "0", "-0", "-1", "1", "0.5", "00.5", ".5", "5.", "1.2300", "1e5", "+1",
		"9223372036854775807", maxPlusOne, "-9223372036854775808",
		"9.223372036854775807", "9.223372036854775808", "0.000000000000000001",
		"99999999999999999999.999", strings.Repeat("9", MaxDecimalLen+1),
		"1e1", "1E+1", "1e-3", "0e5", "true", "[1]", // JSON numbers' other forms: never a decimal string here (issue 41)
	} {
		for _, sc := range []uint8{0, 1, 2, 8, 17, 18} {
			f.Add(s, sc)
		}
	}
	f.Fuzz(func(t *testing.T, s string, scale uint8) {
		checkAgainstRef(t, s, scale%(MaxScale+1))
	})
}

// TestParseUnitsDifferential runs the fuzz property on random strings over the
// grammar's alphabet, which hit every branch far more often than random bytes.
func TestParseUnitsDifferential(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewPCG(s, 1))
	const alphabet = "0123456789000999.-+e x"
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	var b []byte
	for range n {
		b = b[:0]
		for range r.IntN(26) {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
		checkAgainstRef(t, string(b), uint8(r.IntN(MaxScale+1)))
	}
}
