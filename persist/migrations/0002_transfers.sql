-- 0002: internal transfers FUNDING <-> SPOT (the strict-FSM spec, section 7).
-- Postgres is the source of truth for these tables (not downstream of the WAL):
-- the FUNDING ledger, the transfer FSM and the funding adapter's idempotency
-- records. Written by package persist/transfer only.
--
-- Units: every amount is a BIGINT in the smallest unit of its asset
-- (core.Units, 10^-precision of one whole unit); decimals exist only at the
-- API edge. Ids are the core's uint64 user / uint32 asset ids.

-- The FUNDING ledger: one row per (user, asset). A user's FUNDING account
-- exists once any row of theirs exists (created by the first external
-- deposit); a transfer into FUNDING adds the asset's row if it is missing.
CREATE TABLE balances_tb (
    user_id    bigint      NOT NULL CHECK (user_id > 0),
    asset_id   integer     NOT NULL CHECK (asset_id > 0),
    available  bigint      NOT NULL CHECK (available >= 0), -- asset units
    status     text        NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'FROZEN', 'DISABLED')),
    version    bigint      NOT NULL DEFAULT 0, -- +1 on every change of the row
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, asset_id)
);

-- The transfer FSM (spec 7.1). state ids: INIT 0, SOURCE_PENDING 10,
-- SOURCE_DONE 20, TARGET_PENDING 30, COMMITTED 40, FAILED -10,
-- COMPENSATING -20, ROLLED_BACK -30. Every state change is a compare-and-set
-- (UPDATE ... WHERE req_id = $1 AND state = $expected).
-- Deviations from 7.1, on purpose: req_id is the primary key (every lookup is
-- by req_id; transfer_id stays as the numeric id the API shows); amount is
-- BIGINT units, not DECIMAL; cid is unique per user, not globally (a global
-- cid would let one user learn of, or block, another user's cid).
CREATE TABLE transfers_tb (
    req_id        varchar(26) PRIMARY KEY,        -- server-generated ULID
    transfer_id   bigserial   UNIQUE NOT NULL,
    cid           varchar(64) NULL,               -- client idempotency key (optional)
    user_id       bigint      NOT NULL CHECK (user_id > 0),
    asset_id      integer     NOT NULL CHECK (asset_id > 0),
    amount        bigint      NOT NULL CHECK (amount > 0), -- asset units
    transfer_type smallint    NOT NULL CHECK (transfer_type IN (1, 2)), -- 1 = FUNDING->SPOT, 2 = SPOT->FUNDING
    source_type   smallint    NOT NULL CHECK (source_type IN (1, 2)),   -- 1 = FUNDING, 2 = SPOT (trading)
    from_account  text        NOT NULL CHECK (from_account IN ('FUNDING', 'SPOT')),
    to_account    text        NOT NULL CHECK (to_account IN ('FUNDING', 'SPOT')),
    state         smallint    NOT NULL DEFAULT 0 CHECK (state IN (0, 10, 20, 30, 40, -10, -20, -30)),
    error_message text        NULL,               -- last error, for operators
    retry_count   integer     NOT NULL DEFAULT 0, -- adapter calls that ended in an unknown outcome
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, cid),
    CHECK (from_account <> to_account),
    CHECK (transfer_type = CASE WHEN from_account = 'FUNDING' THEN 1 ELSE 2 END),
    CHECK (source_type = CASE WHEN from_account = 'FUNDING' THEN 1 ELSE 2 END)
);
-- The recovery worker's scan: non-terminal transfers by staleness.
CREATE INDEX idx_transfers_state ON transfers_tb (updated_at) WHERE state NOT IN (40, -10, -30);
CREATE INDEX idx_transfers_user ON transfers_tb (user_id, created_at);

-- The funding adapter's idempotency records: the FIRST outcome of each
-- (req_id, adapter, op), written in the same transaction as its balance
-- change. A repeat returns it and changes nothing. Explicit failures are
-- recorded too, so an operation that once failed can never succeed later.
CREATE TABLE transfer_operations (
    req_id     varchar(26) NOT NULL,
    adapter    text        NOT NULL CHECK (adapter IN ('funding', 'spot')),
    op         text        NOT NULL CHECK (op IN ('withdraw', 'deposit', 'refund')),
    result     text        NOT NULL CHECK (result IN ('SUCCESS', 'EXPLICIT_FAIL')),
    code       text        NULL,   -- the failure code when result = EXPLICIT_FAIL
    user_id    bigint      NOT NULL,
    asset_id   integer     NOT NULL,
    amount     bigint      NOT NULL, -- asset units
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (req_id, adapter, op)
);

-- External deposits into FUNDING (the on-chain / bank side), once per tx_ref.
-- sum(amount) per asset is the "deposits" term of the conservation invariant.
CREATE TABLE funding_deposits (
    tx_ref     varchar(128) PRIMARY KEY,
    user_id    bigint       NOT NULL CHECK (user_id > 0),
    asset_id   integer      NOT NULL CHECK (asset_id > 0),
    amount     bigint       NOT NULL CHECK (amount > 0), -- asset units
    created_at timestamptz  NOT NULL DEFAULT now()
);
CREATE INDEX funding_deposits_asset_idx ON funding_deposits (asset_id);
