-- 0004: a leaner write path for the sink, which writes about 7 rows per
-- order (measured with BenchmarkWriteBatchHTTPLike, Postgres backend CPU per
-- order at the http benchmark's mix).
--
-- Indexes: every secondary index costs CPU on each of those rows. The five
-- below took about a third of the backend's CPU per order
-- (spot_ledger_user_idx alone ~30%: its inserts land all over the tree).
-- Nothing in the exchange reads through them (the order fallback uses the
-- orders primary key and trades_{maker,taker}_order_idx), so they go. An
-- operator who needs per-user statements from this database can add them
-- back (CREATE INDEX CONCURRENTLY), or better, on a replica.
DROP INDEX IF EXISTS trades_seq_idx;
DROP INDEX IF EXISTS trades_maker_user_idx;
DROP INDEX IF EXISTS trades_taker_user_idx;
DROP INDEX IF EXISTS orders_user_idx;
DROP INDEX IF EXISTS spot_ledger_user_idx;

-- spot_ledger has no primary key any more: at ~4 rows per order its
-- (seq, idx) btree was ~23% of the backend's CPU per order. Its rows are
-- unique by construction: only the sink writes them, under the
-- core_checkpoint row lock, for seqs above persisted_seq (the tests that
-- replay and overlap batches compare every row). (seq, idx) stays NOT NULL
-- and is the order of the ledger.
ALTER TABLE spot_ledger DROP CONSTRAINT spot_ledger_pkey;

-- wal_events.payload: json instead of jsonb. The payload is written once and
-- read whole; jsonb's input (parse into numerics, sort the keys) was ~12% of
-- the backend's CPU per order, json only checks the syntax. The text is kept
-- as the sink wrote it (snake_case keys in a fixed order); ->, ->> work the
-- same, and payload::jsonb gives containment where needed.
ALTER TABLE wal_events ALTER COLUMN payload TYPE json USING payload::json;
