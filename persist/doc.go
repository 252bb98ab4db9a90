// Package persist writes the core's durable event stream to PostgreSQL (pgx/v5).
//
// Postgres is downstream of the WAL for core data: a Source (the journal's
// follower, in the server) yields durable records in seq order, and a Sink
// turns each batch of records into rows of a read model (orders, trades,
// spot_ledger, wal_events, circuit_breaker_events) in ONE transaction that also moves
// core_checkpoint.persisted_seq to the batch's last seq. Records at or below
// persisted_seq are skipped, so retries, restarts and overlapping batches
// never double a row, and the tables always equal the stream up to
// persisted_seq. Wiping the tables (and the checkpoint) and re-running the
// Sink from seq 1 rebuilds them.
//
// Amounts are int64 in the asset's smallest unit (core.Units) everywhere;
// the migrations document each column's unit. Schema changes are embedded
// SQL files applied by Migrate.
//
// Besides the sink: RecordGap (the seqs a released follower could not
// derive, in sink_gaps) and the audit retention job (PruneAudit).
//
// The package imports core but not journal: the server adapts the journal's
// follower to Source.
package persist
