-- 0001: the core read model, written by the persist Sink from the WAL-derived
-- event stream. Postgres is downstream of the WAL for these tables: they can be
-- rebuilt from the WAL at any time (core_checkpoint = 0, then re-run the Sink).
--
-- Units: every amount, quantity, price and fee is a BIGINT in the smallest
-- unit of its asset (core.Units), exactly as the core computes it; decimals
-- are applied only at the edges. Prices are quote units per one whole base
-- unit (10^BaseScale base units). Ids (user, order, trade, seq) are the core's
-- uint64 values stored as BIGINT (all are far below 2^63 in practice).
-- Times are the command's sequenced time (microsecond precision here).

-- The last command seq whose rows are all in this database. Single row (id=1),
-- updated in the same transaction as the rows of every batch.
CREATE TABLE core_checkpoint (
    id            smallint    PRIMARY KEY CHECK (id = 1),
    persisted_seq bigint      NOT NULL CHECK (persisted_seq >= 0),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
INSERT INTO core_checkpoint (id, persisted_seq) VALUES (1, 0);

-- Latest state of every order the core ever accepted (one row per order id,
-- including orders filled or expired at once, which never rested). A rejected
-- PLACE_ORDER has no order id and no row.
CREATE TABLE orders (
    order_id        bigint      PRIMARY KEY,
    user_id         bigint      NOT NULL,
    market_id       integer     NOT NULL,
    side            text        NOT NULL CHECK (side IN ('BUY', 'SELL')),
    type            text        NOT NULL CHECK (type IN ('LIMIT', 'MARKET')),
    time_in_force   text        NOT NULL CHECK (time_in_force IN ('GTC', 'IOC', 'FOK', 'POST_ONLY')),
    price           bigint      NOT NULL, -- limit price, quote units per whole base unit; 0 for MARKET
    quantity        bigint      NOT NULL, -- total base quantity (after MODIFY: the new total); 0 for a MARKET BUY by quote budget
    quote_quantity  bigint      NOT NULL DEFAULT 0, -- MARKET BUY quote budget incl. fees, quote units; 0 otherwise
    filled_quantity bigint      NOT NULL CHECK (filled_quantity >= 0), -- base units filled so far (sum of its trades)
    status          text        NOT NULL CHECK (status IN ('NEW', 'PARTIALLY_FILLED', 'FILLED', 'CANCELLED', 'EXPIRED', 'REJECTED')),
    client_order_id text        NULL,
    created_seq     bigint      NOT NULL, -- seq of the PLACE_ORDER
    updated_seq     bigint      NOT NULL, -- seq of the last command that changed the row
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
CREATE INDEX orders_user_idx ON orders (user_id, order_id);

-- Every trade, once.
CREATE TABLE trades (
    trade_id       bigint      PRIMARY KEY,
    seq            bigint      NOT NULL, -- the command that produced it
    market_id      integer     NOT NULL,
    price          bigint      NOT NULL, -- quote units per whole base unit (the maker's price)
    quantity       bigint      NOT NULL, -- base units
    quote_amount   bigint      NOT NULL, -- notional, quote units (price * quantity / 10^BaseScale, exact)
    maker_order_id bigint      NOT NULL,
    taker_order_id bigint      NOT NULL,
    maker_user_id  bigint      NOT NULL,
    taker_user_id  bigint      NOT NULL,
    maker_fee      bigint      NOT NULL, -- quote units, paid by the maker
    taker_fee      bigint      NOT NULL, -- quote units, paid by the taker
    taker_side     text        NOT NULL CHECK (taker_side IN ('BUY', 'SELL')),
    time           timestamptz NOT NULL
);
CREATE INDEX trades_seq_idx ON trades (seq);
CREATE INDEX trades_maker_user_idx ON trades (maker_user_id, trade_id);
CREATE INDEX trades_taker_user_idx ON trades (taker_user_id, trade_id);

-- Every SPOT balance change (one core BALANCE event each). For any user and
-- asset, sum(d_available) and sum(d_frozen) equal the core's balance as of
-- core_checkpoint.persisted_seq.
CREATE TABLE spot_ledger (
    seq         bigint      NOT NULL, -- the command
    idx         integer     NOT NULL, -- index of the event within the command's events
    user_id     bigint      NOT NULL, -- 0 is the exchange fee account
    asset_id    integer     NOT NULL,
    d_available bigint      NOT NULL, -- change of the available balance, asset units (signed)
    d_frozen    bigint      NOT NULL, -- change of the frozen balance, asset units (signed)
    cause       text        NOT NULL, -- the command kind: PLACE_ORDER, CANCEL_ORDER, MODIFY_ORDER, SPOT_DEPOSIT, ADJUST, ...
    ref         text        NULL,     -- the command's subject: order id (orders) or req_id / reference (transfers)
    trade_id    bigint      NULL,     -- the trade this change settles, if any
    time        timestamptz NOT NULL,
    PRIMARY KEY (seq, idx)
);
CREATE INDEX spot_ledger_user_idx ON spot_ledger (user_id, asset_id, seq);

-- The matching engine's audit events (ORDER_ACCEPTED, ORDER_MATCHED,
-- ORDER_PARTIALLY_FILLED, ORDER_CANCELLED, ORDER_EXPIRED); payload holds the
-- event's fields in snake_case, amounts in smallest units.
CREATE TABLE wal_events (
    seq        bigint      NOT NULL,
    idx        integer     NOT NULL, -- index of the event within the command's events
    event_type text        NOT NULL CHECK (event_type IN ('ORDER_ACCEPTED', 'ORDER_MATCHED',
                   'ORDER_PARTIALLY_FILLED', 'ORDER_CANCELLED', 'ORDER_EXPIRED', 'ORDER_REJECTED')),
    order_id   bigint      NOT NULL,
    payload    jsonb       NOT NULL,
    time       timestamptz NOT NULL,
    PRIMARY KEY (seq, idx)
);
CREATE INDEX wal_events_order_idx ON wal_events (order_id);
