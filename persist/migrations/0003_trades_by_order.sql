-- GET /api/v1/order/{id} falls back to the read model for orders the server
-- no longer holds in memory; it lists the order's fills from trades by
-- maker or taker order id, which must not scan the table.
CREATE INDEX trades_maker_order_idx ON trades (maker_order_id, trade_id);
CREATE INDEX trades_taker_order_idx ON trades (taker_order_id, trade_id);
