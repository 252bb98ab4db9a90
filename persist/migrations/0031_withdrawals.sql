-- 0031: withdrawals from FUNDING to an on-chain address (package
-- persist/withdraw). One Postgres transaction debits balances_tb, inserts the
-- managed tx CREATED (request_id 'wd-<withdrawal_id>', no nonce: only the
-- lease holder's writer allocates one) and the withdrawal PENDING. The
-- settler follows tx_completions: CONFIRMED -> COMPLETED; FAILED_FINAL
-- (reverted, or the nonce taken by a CANCEL / PLACEHOLDER) -> CANCELLED with
-- the refund to FUNDING in the same transaction (once: a CAS from PENDING);
-- STUCK leaves it PENDING for an operator (it may still be mined).
-- Conservation: Σ amount of PENDING + COMPLETED is the "withdrawn" term.
CREATE TABLE withdrawals (
    withdrawal_id bigint      PRIMARY KEY,
    user_id       bigint      NOT NULL CHECK (user_id > 0),
    asset_id      integer     NOT NULL CHECK (asset_id > 0),
    amount        bigint      NOT NULL CHECK (amount > 0), -- asset units (the exchange's scale)
    value_wei     numeric(78) NOT NULL CHECK (value_wei > 0), -- the same amount in the chain's units
    address       text        NOT NULL,                      -- 0x + 40 lower-case hex
    cid           varchar(64) NULL,                          -- client idempotency key, per user
    submitter     text        NOT NULL,                      -- the hot wallet
    tx_id         bigint      NOT NULL UNIQUE REFERENCES managed_tx (tx_id),
    state         text        NOT NULL CHECK (state IN ('PENDING', 'COMPLETED', 'CANCELLED')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX withdrawals_user_cid ON withdrawals (user_id, cid) WHERE cid IS NOT NULL;
CREATE INDEX withdrawals_user ON withdrawals (user_id, withdrawal_id);
CREATE SEQUENCE withdrawals_id_seq OWNED BY withdrawals.withdrawal_id;

-- How far the settler has applied the completions feed (one row).
CREATE TABLE withdrawal_settle_checkpoint (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    last_seq bigint  NOT NULL
);
INSERT INTO withdrawal_settle_checkpoint VALUES (true, 0);
