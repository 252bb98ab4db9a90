-- 0004: the sink writes about 7 rows per order, and every secondary index
-- costs Postgres CPU on each of them: at the http benchmark's mix the five
-- indexes below took about a third of the backend's CPU per order
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
