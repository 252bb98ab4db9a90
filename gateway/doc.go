// Package gateway is the HTTP edge of the exchange (fasthttp): it decides,
// before anything reaches the sequencer, whether a request is allowed and
// what its numbers mean, submits commands through a Backend and answers from
// the Backend's read view.
//
//   - auth.go: the bearer-token check (HS256 JWT, pinned) and the role and
//     ownership checks built on its Claims; tokencache.go caches verified
//     headers until their expiry.
//   - decimal.go: the strict decimal-string grammar for amounts, prices and
//     quantities, parsed into int64 units at an asset's or market's scale.
//   - errors.go, corestatus.go: APIError, the {status, code, message} value
//     every rejection becomes; codes are part of the public API (stable
//     strings, never renamed), and the core's reason codes map to statuses.
//   - registry.go: asset and market names, ids and scales.
//   - server.go, routes.go, transport.go: the router, limits and the
//     fasthttp server settings; orders.go, market.go, admin.go, health.go:
//     the endpoints; requests.go, jsonscan.go, jsonout.go: strict JSON in,
//     allocation-free JSON out.
//   - backend.go: the contract with the sequenced core (Submit, Read);
//     history.go: bounded memory of recent trades and finished orders;
//     history_user.go: each user's orders and trades in it, and the floors
//     above which it holds all of them; listing.go: the order history and
//     my-trades, from History above the floors and the OrderArchive
//     (Postgres) below them, once it has caught up.
//   - p2p.go: spec 003's user-to-user transfer service at its own paths
//     and in its own error body; p2p_ticker.go: the timer that submits the
//     sequenced ticks executing due transfers.
//
// Handlers never touch the core's processor: reads go through Backend.Read
// (a replica that is answered only once durable), writes through
// Backend.Submit (answered only once fsynced).
package gateway
