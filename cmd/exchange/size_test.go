package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxCmdLines bounds cmd/exchange's non-test Go (issue 34, docs/design.md, "One path per behaviour"): the
// command parses flags and wires packages; a feature's logic, its config's
// defaults and validation, and its tests live in the feature's package.
const maxCmdLines = 1200

// TestCmdStaysWiring fails when cmd/exchange's non-test Go grows past
// maxCmdLines lines (counted as wc -l does): move the logic into its
// feature's package instead.
func TestCmdStaysWiring(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	per := map[string]int{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		per[f] = bytes.Count(b, []byte("\n"))
		total += per[f]
	}
	if total == 0 {
		t.Fatal("no Go files counted: run from cmd/exchange")
	}
	if total > maxCmdLines {
		t.Fatalf("cmd/exchange has %d lines of non-test Go (limit %d): move feature logic into its package (docs/design.md, One path per behaviour); per file: %v",
			total, maxCmdLines, per)
	}
	t.Logf("cmd/exchange: %d lines of non-test Go (limit %d)", total, maxCmdLines)
}
