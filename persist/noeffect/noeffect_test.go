package noeffect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Every SQLSTATE class Postgres defines (Appendix A).
var classes = []string{"00", "01", "02", "03", "08", "09", "0A", "0B", "0F", "0L", "0P", "0Z", "20", "21", "22", "23",
	"24", "25", "26", "27", "28", "2B", "2D", "2F", "34", "38", "39", "3B", "3D", "3F", "40", "42", "44", "53", "54", "55",
	"57", "58", "72", "F0", "HV", "P0", "XX"}

var severities = []string{"ERROR", "FATAL", "PANIC", "WARNING", "NOTICE", "LOG", ""}

type notSent struct{}

func (notSent) Error() string     { return "dial: connection refused" }
func (notSent) SafeToRetry() bool { return true }

type sentMaybe struct{}

func (sentMaybe) Error() string     { return "write: broken pipe" }
func (sentMaybe) SafeToRetry() bool { return false }

// TestRule: only an ERROR of class 22, 23, 42, P0 (or 40001, 40P01) proves
// a rollback; every other class and every other severity does not, bare or
// wrapped, and whether the severity comes localized or not.
func TestRule(t *testing.T) {
	proof := map[string]bool{"22": true, "23": true, "42": true, "P0": true}
	for _, class := range classes {
		for _, sev := range severities {
			for _, code := range []string{class + "000", class + "P01", class + "001", class + "003"} {
				want := sev == "ERROR" && (proof[class] || code == "40001" || code == "40P01")
				for _, pe := range []*pgconn.PgError{
					{Severity: sev, SeverityUnlocalized: sev, Code: code},
					{Severity: sev, Code: code},                                // a server before 9.6: no V field
					{Severity: "ERREUR", SeverityUnlocalized: sev, Code: code}, // localized S, V decides
				} {
					for _, err := range []error{pe, fmt.Errorf("transfer: insert 01M8: %w", pe), fmt.Errorf("a: %w", fmt.Errorf("b: %w", pe))} {
						if got := RolledBack(err); got != want {
							t.Errorf("RolledBack(%q severity %q/%q) = %v, want %v", code, pe.Severity, pe.SeverityUnlocalized, got, want)
						}
						if got := Proven(err); got != want {
							t.Errorf("Proven(%q severity %q/%q) = %v, want %v", code, pe.Severity, pe.SeverityUnlocalized, got, want)
						}
					}
				}
			}
		}
	}
	// The issue's own error: FATAL 57P01 on a pipelined insert + debit + commit.
	fatal := &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01",
		Message: "terminating connection due to administrator command"}
	if Proven(fmt.Errorf("transfer: insert 01M8J4A9RZEWYRXXWNTVHNQ23M: %w", fatal)) {
		t.Error("FATAL 57P01 is proof")
	}
	// A localized ERROR without the V field is not recognised: not proof.
	if Proven(&pgconn.PgError{Severity: "ERREUR", Code: "23505"}) {
		t.Error("an unrecognised severity is proof")
	}
	// A malformed code.
	for _, code := range []string{"", "2", "235", "2350", "235050"} {
		if Proven(&pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: code}) {
			t.Errorf("code %q is proof", code)
		}
	}
}

// TestNotSent: an error that says the request never left is proof; every
// other error that is not a Postgres ERROR is not.
func TestNotSent(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{notSent{}, true},
		{fmt.Errorf("acquire: %w", notSent{}), true},
		{sentMaybe{}, false},
		{io.EOF, false},
		{io.ErrUnexpectedEOF, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{errors.New("unexpected EOF"), false},
		{errors.New("transfer: batcher full"), false},
	} {
		if got := Proven(c.err); got != c.want {
			t.Errorf("Proven(%v) = %v, want %v", c.err, got, c.want)
		}
		if RolledBack(c.err) {
			t.Errorf("RolledBack(%v): not a Postgres error", c.err)
		}
	}
}
