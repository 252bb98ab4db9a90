-- 0060: binary orders recorded as placed and as they rest (issue 40; spec 004
-- Appendix B: what a row needs to rebuild a book order). On a binary market's
-- row side and price are the order's own, in its outcome's terms (BUY NO @
-- 0.30 is side BUY, price 300000), never overwritten by the book's; the book
-- terms sit beside them. Every column is NULL on spot rows, whose columns keep
-- their meaning. Rows written before this migration are completed by the
-- documented sink reset (README "Postgres": the read model rebuilt from the
-- WAL).
ALTER TABLE orders
    ADD COLUMN outcome           varchar(3)  CHECK (outcome IN ('YES', 'NO')),
    -- NATIVE_* for YES orders, SYNTHETIC_* for NO orders (rest on the YES book
    -- on the other side), then the book direction
    ADD COLUMN book_type         varchar(20) CHECK (book_type IN ('NATIVE_BUY', 'NATIVE_SELL', 'SYNTHETIC_BUY',
                                     'SYNTHETIC_SELL')),
    ADD COLUMN book_direction    varchar(10) CHECK (book_direction IN ('BUY', 'SELL')),
    ADD COLUMN book_price        bigint,     -- YES book price, quote units per share (NO: payout - price)
    ADD COLUMN frozen_asset_type varchar(20) CHECK (frozen_asset_type IN ('FUNDS', 'SHARES')), -- BUY: quote, SELL: shares
    ADD COLUMN frozen_amount     bigint      CHECK (frozen_amount >= 0), -- what the order holds now (0 once closed)
    ADD COLUMN remaining_quantity bigint GENERATED ALWAYS AS
        (CASE WHEN outcome IS NOT NULL THEN quantity - filled_quantity END) STORED; -- shares not yet filled
ALTER TABLE orders ADD CONSTRAINT orders_binary_terms CHECK ((outcome IS NULL) = (book_type IS NULL)
    AND (outcome IS NULL) = (book_direction IS NULL) AND (outcome IS NULL) = (book_price IS NULL)
    AND (outcome IS NULL) = (frozen_asset_type IS NULL) AND (outcome IS NULL) = (frozen_amount IS NULL));

-- a binary trade from each party's side: the maker's outcome and own side,
-- and both parties' prices in their own outcome's terms (price stays the
-- YES book's). NULL on spot.
ALTER TABLE trades
    ADD COLUMN maker_outcome varchar(3) CHECK (maker_outcome IN ('YES', 'NO')),
    ADD COLUMN maker_side    text       CHECK (maker_side IN ('BUY', 'SELL')),
    ADD COLUMN maker_price   bigint,
    ADD COLUMN taker_price   bigint;
