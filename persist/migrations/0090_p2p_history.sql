-- 0090: the per-user indexes of the transfer history (issue 39). Finished
-- transfers leave the core after --p2p-retention, and GET /transfers reads
-- the pages that reach them from p2p_transfers, newest first by id, one
-- user at a time, as sender and as recipient (one index scan each). They
-- replace the single-column ones of 0050, which are their prefixes.
CREATE INDEX IF NOT EXISTS p2p_transfers_from_id ON p2p_transfers (from_user_id, id);
CREATE INDEX IF NOT EXISTS p2p_transfers_to_id ON p2p_transfers (to_user_id, id);
DROP INDEX IF EXISTS p2p_transfers_from;
DROP INDEX IF EXISTS p2p_transfers_to;
