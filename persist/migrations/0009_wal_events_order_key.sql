-- 0009: wal_events keeps one btree instead of two.
--
-- It had a primary key on (seq, idx) and an index on order_id (to find an
-- order's audit events, spec 004 4.1): two btree inserts for each of the
-- ~1.5 audit events per order. One primary key on (order_id, seq, idx)
-- serves both:
--   - an order's events are the key's leading column, already in the order
--     they happened (seq, idx), so "WHERE order_id = $1 ORDER BY seq, idx"
--     reads one range of the index;
--   - it still refuses a second copy of any event: the same event always
--     has the same order id, so a re-written (seq, idx) collides on the
--     whole key, as it did on (seq, idx) alone.
-- Measured with BenchmarkWriteBatchHTTPLike (Postgres backend CPU per order,
-- three interleaved pairs of runs): 18.8/16.7/16.9 -> 16.4/15.2/14.9 us.
-- IF EXISTS: an operator may already have dropped either by hand.
ALTER TABLE wal_events DROP CONSTRAINT IF EXISTS wal_events_pkey;
DROP INDEX IF EXISTS wal_events_order_idx;
ALTER TABLE wal_events ADD CONSTRAINT wal_events_pkey PRIMARY KEY (order_id, seq, idx);
