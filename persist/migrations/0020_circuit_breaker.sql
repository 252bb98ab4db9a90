-- 0020: runtime protection (spec 004 §4-§5), derived from the WAL by the sink.
--
-- circuit_breaker_events: one row per breaker trip (a market or the whole
-- core halted), with the spec's columns; the operator's resolution fills
-- resolved_at / resolved_by / resolution_note. market_id is the core's
-- market id as text, '*' for a core-level halt. trigger_seq / resolved_seq
-- are the commands that tripped and resolved it (the WAL is the record;
-- this table is re-derivable from it like every other).
CREATE TABLE circuit_breaker_events (
    id              bigserial    PRIMARY KEY,
    market_id       varchar(64)  NOT NULL,
    trigger_reason  varchar(50)  NOT NULL CHECK (trigger_reason IN ('INVARIANT_BALANCE', 'NEGATIVE_BALANCE',
                        'ORDERBOOK_DESYNC', 'RECOVERY_FAILED', 'CLEARING_ERROR', 'MANUAL_HALT',
                        'INVARIANT_RESERVE', 'INVARIANT_COST_SUM', 'INVARIANT_SHARES')),
    context         jsonb        NOT NULL DEFAULT '{}',
    resolved_at     timestamptz,
    resolved_by     varchar(50),  -- the operator's user id
    resolution_note text,
    triggered_at    timestamptz  NOT NULL DEFAULT now(),
    trigger_seq     bigint       NOT NULL UNIQUE,
    resolved_seq    bigint,
    resolved_status varchar(20)   -- the status the market left HALTED for (ACTIVE, SUSPENDED); NULL for the core
);
CREATE INDEX idx_cb_market ON circuit_breaker_events (market_id, triggered_at DESC);
COMMENT ON TABLE circuit_breaker_events IS 'circuit breaker trips and their operator resolutions (spec 004 5.4)';

-- wal_events: an IOC / market order's remainder that expired without any
-- fill is ORDER_UNFILLED; ORDER_EXPIRED is a remainder after at least one
-- fill (spec 004 4.2).
ALTER TABLE wal_events DROP CONSTRAINT IF EXISTS wal_events_event_type_check;
ALTER TABLE wal_events ADD CONSTRAINT wal_events_event_type_check CHECK (event_type IN ('ORDER_ACCEPTED',
    'ORDER_MATCHED', 'ORDER_PARTIALLY_FILLED', 'ORDER_CANCELLED', 'ORDER_EXPIRED', 'ORDER_UNFILLED', 'ORDER_REJECTED'));
-- The audit retention job (--audit-retention) deletes by time, oldest
-- first: a BRIN index (time only grows with seq, in insert order) finds them
-- for a few pages.
CREATE INDEX wal_events_time_brin ON wal_events USING brin (time);

-- sink_gaps: seqs whose rows the sink could not derive (the WAL was released
-- past its checkpoint, --follower-max-retained): never skipped silently.
CREATE TABLE sink_gaps (
    id          bigserial   PRIMARY KEY,
    from_seq    bigint      NOT NULL,
    to_seq      bigint      NOT NULL CHECK (to_seq >= from_seq),
    recorded_at timestamptz NOT NULL DEFAULT now(),
    reason      text        NOT NULL
);
