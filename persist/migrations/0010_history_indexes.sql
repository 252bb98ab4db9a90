-- 0010: the per-user indexes of the order history and my-trades (issue 20).
-- GET /api/v1/orders?status=all and GET /api/v1/my-trades read pages older
-- than the server's memory from these tables, newest first by id, one
-- user at a time: without an index each page would scan the table. 0004
-- dropped these three for the sink's write cost; they come back because the
-- history is a product feature now (measured: BenchmarkWriteBatchHTTPLike,
-- see the README's Postgres section). spot_ledger_user_idx stays dropped.
CREATE INDEX IF NOT EXISTS orders_user_idx ON orders (user_id, order_id);
CREATE INDEX IF NOT EXISTS trades_maker_user_idx ON trades (maker_user_id, trade_id);
CREATE INDEX IF NOT EXISTS trades_taker_user_idx ON trades (taker_user_id, trade_id);
