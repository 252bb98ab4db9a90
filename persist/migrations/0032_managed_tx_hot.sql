-- 0032: the broadcast record (ALLOCATED -> TRACKING, persist/chaintx/pgstore
-- Submitted) and the receipt records become HOT updates: no index's key or
-- predicate names a column they change, and pages keep room for the new
-- row version. Before, the partial indexes' predicates on `state` made every
-- state change insert a new entry into every index of managed_tx.
--
-- nonce IS NULL <=> state = 'CREATED' (0030's CHECK); confirmed_at IS NOT
-- NULL <=> a final state (the CHECK below: set when CONFIRMED / FAILED_FINAL
-- is reached, never cleared). Queries that walk a submitter's CREATED or
-- pending txs name these predicates (besides their state conditions) so the
-- planner can use the indexes.
-- fillfactor 50: a page takes new rows up to half full, and the other half
-- holds their broadcast records' new versions (at 70, about 45% of those
-- updates still found no room; at 50, all of them were HOT in the benchmark).
ALTER TABLE managed_tx SET (fillfactor = 50);
ALTER TABLE managed_tx ADD CONSTRAINT managed_tx_final_confirmed_at
    CHECK ((confirmed_at IS NOT NULL) = (state IN ('CONFIRMED', 'FAILED_FINAL')));
DROP INDEX managed_tx_created;
CREATE INDEX managed_tx_created ON managed_tx (submitter, tx_id) WHERE nonce IS NULL;
DROP INDEX managed_tx_pending;
CREATE INDEX managed_tx_pending ON managed_tx (submitter, allocated_at) WHERE nonce IS NOT NULL AND confirmed_at IS NULL;
