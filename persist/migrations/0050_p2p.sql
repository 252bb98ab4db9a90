-- 0050: the user-to-user transfer service (spec 003 §6), derived from the
-- WAL by the sink like every other table. Amounts are bigint in the asset's
-- smallest unit (USD: cents), not the spec's DECIMAL(15,2): the core's
-- integers are the record (asset tells the scale). Every row carries the
-- seq that last wrote it.

-- user_balances: one row per transfer-service user. user_id is the spec's
-- userId (the handle), id the numeric user id (the token's sub). balance is
-- available + held of the service's asset as of updated_seq: written at
-- creation and by every completed transfer of the user (the core's answer
-- of GET .../balance is always exact; this row does not see trading or
-- deposits in the same asset until the user's next transfer).
CREATE TABLE user_balances (
    user_id     varchar(50) PRIMARY KEY,
    id          bigint      NOT NULL UNIQUE,
    asset       integer     NOT NULL,
    balance     bigint      NOT NULL,          -- asset units
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    updated_seq bigint      NOT NULL,
    version     bigint      NOT NULL DEFAULT 0 -- the spec's @Version: one per change
);

-- balance_changes: one row per debit or credit. A transfer makes two
-- (transfer_out, transfer_in: external_id = related_id = the transfer id);
-- a user's initial balance is a 'charge' (external_id = the numeric user id).
-- Unique on (external_id, type): the spec's idempotency key.
CREATE TABLE balance_changes (
    id             bigserial   PRIMARY KEY,
    external_id    bigint      NOT NULL,
    type           varchar(20) NOT NULL CHECK (type IN ('transfer_out', 'transfer_in', 'refund', 'charge', 'withdraw')),
    user_id        varchar(50) NOT NULL,
    amount         bigint      NOT NULL,        -- signed asset units: < 0 debit, > 0 credit
    related_id     varchar(50),
    status         varchar(20) NOT NULL CHECK (status IN ('PROCESSING', 'COMPLETED', 'FAILED')),
    created_at     timestamptz NOT NULL,
    completed_at   timestamptz,
    failure_reason varchar(500),
    balance_before bigint,                      -- asset units, available + held
    balance_after  bigint,
    seq            bigint      NOT NULL,
    UNIQUE (external_id, type)
);
CREATE INDEX balance_changes_user ON balance_changes (user_id);
CREATE INDEX balance_changes_related ON balance_changes (related_id);
CREATE INDEX balance_changes_created ON balance_changes (created_at);

-- p2p_transfers: the spec's transfers table (named so it cannot be taken
-- for the internal FUNDING<->SPOT transfers of 0002).
CREATE TABLE p2p_transfers (
    id             bigint      PRIMARY KEY,     -- the spec's transferId
    from_user_id   varchar(50) NOT NULL,
    to_user_id     varchar(50) NOT NULL,
    amount         bigint      NOT NULL CHECK (amount > 0), -- asset units
    asset          integer     NOT NULL,
    status         varchar(20) NOT NULL CHECK (status IN ('PENDING', 'DEBIT_PROCESSING', 'CREDIT_PROCESSING',
                       'COMPLETED', 'DEBIT_FAILED', 'CANCELLED')),
    created_at     timestamptz NOT NULL,
    execute_at     timestamptz NOT NULL,        -- created_at + the hold: the end of the cancel window
    completed_at   timestamptz,
    cancelled_at   timestamptz,
    failure_reason varchar(500),
    request_id     varchar(32),
    updated_at     timestamptz NOT NULL,
    created_seq    bigint      NOT NULL,
    updated_seq    bigint      NOT NULL
);
CREATE INDEX p2p_transfers_from ON p2p_transfers (from_user_id);
CREATE INDEX p2p_transfers_to ON p2p_transfers (to_user_id);
CREATE INDEX p2p_transfers_created ON p2p_transfers (created_at);
CREATE INDEX p2p_transfers_status ON p2p_transfers (status);
