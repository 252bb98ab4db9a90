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
//
// # Binary markets (issue 22)
//
// A binary YES/NO market (binary*.go) is a second market kind beside spot.
// Its rules, where the issue is silent, as a prediction-market operator
// would set them:
//
//   - Config (KindConfigBinary): the quote asset, payout per share in quote
//     Units (a multiple of 100; default one whole quote unit, so the quote's
//     scale must be >= 2 for the default), tick = payout/100 (derived; the
//     command carries Cfg.Tick 0), lot / min / max in whole shares, maker and
//     taker fee rates, an optional close time (unix ns, in Command.Price; an
//     order at or after it is refused with MARKET_CLOSED; the operator
//     resolves the market as usual). A market is created DRAFT and may be
//     reconfigured only while DRAFT. Spot and binary share the market id
//     space and MaxMarkets (256); a settled market keeps its slot.
//   - Question (Command.Text): what the market asks, at most MaxQuestionLen
//     (256) bytes of valid UTF-8 with no control character (C0 including
//     newline and tab, DEL, C1); anything else is INVALID_QUESTION and
//     changes nothing. It is stored as given (not trimmed or normalized), in
//     the snapshot and the state hash, and replaced by a DRAFT
//     reconfiguration. The core accepts the empty question: it is what a
//     market configured before questions existed has (a WAL record without
//     one, a version-3 snapshot), so those replay and restore exactly; the
//     gateway requires a non-empty one.
//   - Orders: KindPlaceOrder with Flags = outcome (1 YES, 2 NO), Side and
//     Price in the outcome's own terms (quote Units per share, a multiple of
//     the tick, 1..99 ticks). LIMIT only (MARKET: NOT_SUPPORTED; a
//     marketable limit at 99 ticks is the same thing with a bound); every
//     TIF and both STP modes as on spot. STP compares users across outcomes:
//     a user's BUY YES and BUY NO never mint against each other. Modify is
//     refused (NOT_SUPPORTED): cancel and place again.
//   - Book: one YES book; a NO order rests at payout - price on the other
//     side (SYNTHETIC). Fills are at the maker's book price. Order events of
//     a binary market carry Side = book direction, Price = book price (YES
//     terms; every order event has it, the closing ones too: the order's
//     limit on the book), Detail = outcome (book_type: YES = NATIVE, NO =
//     SYNTHETIC) and Payout (a NO order's own price is Payout - Price);
//     ORDER_ACCEPTED and ORDER_PARTIALLY_FILLED carry Frozen, what the
//     order holds afterwards. EvTrade carries Flags = FillKind, Side = the
//     taker's own side, Detail = the taker's outcome, Amount = book price x
//     qty (YES terms), Fee / Fee2 = maker / taker fee, each on that party's
//     own notional, and Payout.
//   - Holds: a BUY holds own price x qty + the worst-case fee (the higher
//     of the two rates, floor) in quote. A BUY taker that traded keeps,
//     once its matching ends, exactly what its remainder can cost at its own
//     limit: what it got below its limit (and the fee difference) is
//     released in the same command, in one release. A resting order keeps
//     what it froze until it closes, as on spot (a maker whose rate is below
//     the worst case holds that difference until then). A SELL holds shares of its
//     outcome (pending sell); selling more than volume - pending is refused
//     with INSUFFICIENT_SHARES (no short selling: to be short YES, buy NO).
//   - Accounting, exact to the unit: a leg's notional = own price x qty;
//     fee = floor(notional x rate). A buyer pays notional + fee, a seller
//     receives notional - fee; both fees go to the market's pnl pool. The
//     position's cost sum of that outcome moves by exactly what the user
//     paid (+) or received (-). Mint adds payout x qty to the reserve, burn
//     takes it out. Hence, per fill, d(reserve + pnl pool) == d(sum of cost
//     sums). Reserve and pnl pool are quote held by the core outside every
//     account: the quote asset's conservation counts them (assetState.total
//     includes them; AssetTotal reports it).
//   - Lifecycle: DRAFT -activate-> ACTIVE <-suspend/resume-> SUSPENDED;
//     resolve (YES | NO) from ACTIVE or SUSPENDED -> RESOLVED; void from
//     DRAFT, ACTIVE or SUSPENDED -> VOIDED. Resolve and void cancel the
//     first MaxSettleSlice resting orders at once (code MARKET_CLOSED on the
//     cancel events); KindSettle slices (1..MaxSettleSlice items each)
//     cancel the rest, then pay positions in creation order: payout per
//     winning share (VOID: payout/2 per YES and per NO share), zeroing each
//     position (its cost sum leaves the running total with it). The slice
//     that pays the last position moves the pnl pool to the fee account,
//     drops the positions and moves RESOLVED to SETTLED (VOIDED stays
//     VOIDED); reserve, pnl pool and positions are then 0. Users may cancel
//     their own orders in RESOLVED / VOIDED before the slices reach them.
//   - Breaker: the five invariants (binary_check.go) trip the market's
//     breaker with INVARIANT_SHARES, INVARIANT_RESERVE, INVARIANT_COST_SUM,
//     INVARIANT_OVERSOLD (a new reason: pending sell above volume) or
//     INVARIANT_BALANCE (pending sells != what resting sells hold). A HALTED
//     binary market that was resolved or voided returns, on the operator's
//     resolution, to that state (never to trading); the resolution re-runs
//     the binary checks. Resolve, void and settle wait while the core is
//     halted.
package core
