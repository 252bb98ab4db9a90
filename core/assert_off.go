//go:build !invariants

package core

// deepChecks is off in production builds; see assert_on.go.
const deepChecks = false
