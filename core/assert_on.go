//go:build invariants

package core

// deepChecks turns on the expensive per-command assertions (the tests build
// with -tags invariants): after every command the touched book is verified
// level by level against its orders.
const deepChecks = true
