-- 0040: binary YES/NO prediction markets (issue 22), derived from the WAL by
-- the sink like every other table.
--
-- binary_markets: one row per binary market as configured (KindConfigBinary),
-- its lifecycle status and outcome kept current from the core's events; a
-- market id may be configured again once its market is archived (the slot
-- released, archived_seq set), so the live row per id is the one with
-- archived_seq NULL. Money in the quote asset's smallest units; shares whole.
CREATE TABLE binary_markets (
    id             bigserial   PRIMARY KEY,
    market_id      integer     NOT NULL,
    quote_asset_id integer     NOT NULL,
    payout         bigint      NOT NULL, -- quote units a winning share pays
    tick           bigint      NOT NULL, -- payout / 100
    lot            bigint      NOT NULL,
    min_qty        bigint      NOT NULL,
    max_qty        bigint      NOT NULL,
    maker_fee      bigint      NOT NULL, -- millionths
    taker_fee      bigint      NOT NULL, -- millionths
    close_time     timestamptz,          -- no orders at or after it; NULL: none
    status         varchar(16) NOT NULL CHECK (status IN ('DRAFT', 'ACTIVE', 'SUSPENDED', 'HALTED', 'RESOLVED',
                       'SETTLED', 'VOIDED', 'ARCHIVED')),
    outcome        varchar(3)  CHECK (outcome IN ('YES', 'NO')), -- set by resolve; NULL when voided
    settled        boolean     NOT NULL DEFAULT false, -- every position paid
    pnl_paid       bigint,               -- the pnl pool moved to the fee account when settlement ended
    created_seq    bigint      NOT NULL UNIQUE,
    updated_seq    bigint      NOT NULL,
    archived_seq   bigint
);
CREATE UNIQUE INDEX binary_markets_live ON binary_markets (market_id) WHERE archived_seq IS NULL;
COMMENT ON TABLE binary_markets IS 'binary YES/NO markets: config, lifecycle status, outcome';

-- positions: the latest position per (binary market, user), from the core's
-- POSITION events (absolute values); zeroed when settled, removed when the
-- market is archived.
CREATE TABLE positions (
    market_id        integer NOT NULL,
    user_id          bigint  NOT NULL,
    yes_volume       bigint  NOT NULL, -- shares held, pending sells included
    no_volume        bigint  NOT NULL,
    yes_cost_sum     bigint  NOT NULL, -- net quote put into YES (fees included, sells net of fee)
    no_cost_sum      bigint  NOT NULL,
    yes_pending_sell bigint  NOT NULL, -- shares held by resting SELL orders
    no_pending_sell  bigint  NOT NULL,
    updated_seq      bigint  NOT NULL,
    PRIMARY KEY (market_id, user_id)
);
COMMENT ON TABLE positions IS 'binary market positions, latest per user and market';

-- trades of binary markets carry their fill kind and the taker's outcome
-- (NULL for spot); price is the YES book price, quantity in shares.
ALTER TABLE trades ADD COLUMN fill_kind varchar(16)
    CHECK (fill_kind IN ('TRANSFER_YES', 'TRANSFER_NO', 'MINT', 'BURN'));
ALTER TABLE trades ADD COLUMN taker_outcome varchar(3) CHECK (taker_outcome IN ('YES', 'NO'));

-- the breaker reason binary markets add (pending sell above volume)
ALTER TABLE circuit_breaker_events DROP CONSTRAINT IF EXISTS circuit_breaker_events_trigger_reason_check;
ALTER TABLE circuit_breaker_events ADD CONSTRAINT circuit_breaker_events_trigger_reason_check
    CHECK (trigger_reason IN ('INVARIANT_BALANCE', 'NEGATIVE_BALANCE', 'ORDERBOOK_DESYNC', 'RECOVERY_FAILED',
        'CLEARING_ERROR', 'MANUAL_HALT', 'INVARIANT_RESERVE', 'INVARIANT_COST_SUM', 'INVARIANT_SHARES',
        'INVARIANT_OVERSOLD'));
