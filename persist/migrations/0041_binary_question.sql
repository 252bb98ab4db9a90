-- 0041: a binary market's question (issue 22, item 6): what the market asks,
-- from its config command (KindConfigBinary's Text; the core allows at most
-- 256 bytes of UTF-8 without control characters). NULL for a market
-- configured before questions existed (a WAL record without one); the
-- gateway requires one for every market it creates.
ALTER TABLE binary_markets ADD COLUMN question text;
COMMENT ON COLUMN binary_markets.question IS 'what the market asks; NULL: configured before questions';
