-- 0007: spot_ledger has no unique key (0004), so a checkpoint moved back
-- without wiping the tables would let the sink append ledger rows twice.
-- The sink refuses to start on rows past the checkpoint; this BRIN index
-- (a few pages: seq only grows, in insert order) makes that check cheap.
CREATE INDEX spot_ledger_seq_brin ON spot_ledger USING brin (seq);
