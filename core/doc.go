// Package core is the business-logic processor of UBSCore: commands in, events out.
//
// It owns all trading state — spot balances per user per asset, order books,
// idempotency sets — and is driven by exactly one goroutine that lives outside
// this package. It is pure and deterministic:
//
//   - no wall clock (time arrives on every Command), no randomness, no goroutines,
//     no I/O, and no output that depends on map iteration order;
//   - the same command sequence from the same snapshot yields byte-identical
//     state (see StateHash) and byte-identical events;
//   - every command is validated in full before anything is mutated, so a command
//     either applies whole or is rejected with a stable Code and changes nothing;
//     a command whose own per-command checks fail anyway (a bug, corrupt state)
//     panics with a *Rollback, and the driver discards it (rollback.go).
//
// Runtime protection (spec 004): a circuit breaker per market and for the
// whole core (breaker.go, status.go), the full invariant check
// (invariants.go), and fault commands for the fault-injection suite
// (fault.go).
//
// Money is int64 in each asset's smallest unit (Units). Prices are quote units per
// one whole base unit (10^BaseScale base units); a market's tick × lot is required
// to be a multiple of 10^BaseScale so every notional is an exact integer and
// conservation holds to the unit. Every add and multiply is overflow-checked.
//
// Fees are charged in the quote asset: a buyer pays notional + fee, a seller
// receives notional − fee, and the fee account (FeeUser) receives both fees.
// Fees round down (floor), which is what makes "freeze the worst-case fee at
// placement" always sufficient: the sum of per-fill floors never exceeds the
// floor of the total.
package core
