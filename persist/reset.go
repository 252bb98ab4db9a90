package persist

// ResetReadModelSQL empties every table the sink derives from the WAL and
// moves its checkpoint back to 0, so that the next sink rebuilds them from
// the WAL (after changing how rows are derived, e.g. migration 0060's
// binary order columns). Run it with the exchange stopped;
// docs/operations.md "Postgres" quotes it. FUNDING, the transfer FSM, withdrawals, managed
// txs and sink_gaps are not derived rows and are kept. The checkpoint
// refuses to move back while spot_ledger holds rows past it (migration
// 0008): the TRUNCATE comes first.
const ResetReadModelSQL = `TRUNCATE orders, trades, spot_ledger, wal_events, circuit_breaker_events, binary_markets, positions, user_balances, balance_changes, p2p_transfers;
UPDATE core_checkpoint SET persisted_seq = 0;`
