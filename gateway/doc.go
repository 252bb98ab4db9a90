// Package gateway holds the pieces of the HTTP edge that decide, before anything
// reaches the sequencer, whether a request is allowed and what its numbers mean:
//
//   - auth.go: the bearer-token check (HS256 JWT, pinned) and the role and
//     ownership checks built on its Claims.
//   - decimal.go: the strict decimal-string grammar for amounts, prices and
//     quantities, parsed into int64 units at an asset's or market's scale.
//   - errors.go: APIError, the {status, code, message} value every rejection here
//     becomes; Code is part of the public API (stable strings, never renamed).
//
// Nothing here touches the core, the journal or the network: every function is
// a pure check over its arguments (plus the secret), so the server can call them
// from any handler goroutine.
package gateway
