package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary stand in for the bench binary when a
// scenario re-runs its own executable (the hello-world target, wrk-check's
// generator runs).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
