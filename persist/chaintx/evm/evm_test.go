package evm

// ParseAddress: only 0x + 40 hex digits, never the zero address, and a
// mixed-case address must carry a valid EIP-55 checksum; the fuzz target
// checks it never panics and that whatever it accepts round-trips.

import (
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	good := "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266" // anvil dev account 0, checksummed
	for _, c := range []struct {
		in string
		ok bool
	}{
		{good, true},
		{strings.ToLower(good), true},
		{"0x" + strings.ToUpper(good[2:]), true},
		{"0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266", false}, // one letter's case flipped
		{"0x0000000000000000000000000000000000000000", false},
		{good[:41], false},
		{"f39Fd6e51aad88F6F4ce6aB8827279cffFb92266", false},
		{"0xg39fd6e51aad88f6f4ce6ab8827279cfffb92266", false},
		{"", false},
	} {
		a, err := ParseAddress(c.in)
		if (err == nil) != c.ok {
			t.Errorf("%q: %v", c.in, err)
		}
		if err == nil && string(a) != strings.ToLower(c.in) {
			t.Errorf("%q -> %q", c.in, a)
		}
	}
	if Checksummed("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266") != good {
		t.Fatal("checksum form")
	}
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "0x", "", "0x0000000000000000000000000000000000000000",
		"0xF39FD6E51AAD88F6F4CE6AB8827279CFFFB92266", "0xf39fd6e51aad88f6f4ce6ab8827279cfffb9226"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			return
		}
		if len(a) != 42 || string(a) != strings.ToLower(string(a)) {
			t.Fatalf("%q accepted as %q", s, a)
		}
		if b, err := ParseAddress(Checksummed(a)); err != nil || b != a {
			t.Fatalf("%q: checksummed form %q does not round-trip: %v", s, Checksummed(a), err)
		}
	})
}
