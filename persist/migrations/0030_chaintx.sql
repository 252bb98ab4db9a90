-- 0030: managed on-chain transactions (spec 002 §4; package persist/chaintx).
-- Postgres is the source of truth of these tables. Every critical write
-- (nonce, cursor, signed raws, state, schedule times, receipt, finality,
-- remediation) is made by persist/chaintx/pgstore in a transaction that first
-- locks the submitter's lease row FOR SHARE where owner_node, fencing_token
-- and expiry (clock_timestamp()) match the writer's lease: no row = FENCED,
-- nothing written.
-- Addresses and hashes are 0x-prefixed lower-case hex; values are wei.

-- The right to act for a submitter (§3.1, §4.1).
CREATE TABLE submitter_lease (
    submitter     text        PRIMARY KEY,
    owner_node    text        NOT NULL,
    fencing_token bigint      NOT NULL CHECK (fencing_token > 0), -- +1 at every take-over, never down
    expires_at    timestamptz NOT NULL,                          -- database time
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- The database end of nonce = max(chain, cache, db) (§3.4, §4.3).
CREATE TABLE submitter_nonce_cursor (
    submitter     text        PRIMARY KEY,
    next_nonce    bigint      NOT NULL CHECK (next_nonce >= 0), -- the next nonce to allocate; never moves back
    fencing_token bigint      NOT NULL,                         -- token of the last write
    updated_at    timestamptz NOT NULL DEFAULT now()
);
-- The cursor never moves back, whoever writes.
CREATE FUNCTION submitter_nonce_cursor_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.next_nonce < OLD.next_nonce THEN
        RAISE EXCEPTION 'submitter_nonce_cursor: next_nonce of % may not move back (% -> %)',
            OLD.submitter, OLD.next_nonce, NEW.next_nonce;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER submitter_nonce_cursor_forward BEFORE UPDATE ON submitter_nonce_cursor
    FOR EACH ROW EXECUTE FUNCTION submitter_nonce_cursor_forward();

-- The authority for nonce and state (§3.3, §4.2).
CREATE TABLE managed_tx (
    tx_id            bigserial   PRIMARY KEY,
    submitter        text        NOT NULL,
    request_id       text        NULL,          -- idempotency key per submitter (optional)
    nonce            bigint      NULL CHECK (nonce >= 0), -- set at ALLOCATED, never changed
    to_address       text        NOT NULL,
    value_wei        numeric(78) NOT NULL CHECK (value_wei >= 0),
    data             bytea       NOT NULL DEFAULT '\x',
    gas_limit        bigint      NOT NULL CHECK (gas_limit > 0),
    tx_hash          text        NULL,          -- hash of the ORIGINAL signed tx (stored before broadcast)
    state            text        NOT NULL CHECK (state IN ('CREATED', 'ALLOCATED', 'TRACKING', 'CONFIRMED', 'FAILED_FINAL', 'STUCK')),
    sub_state        text        NULL,          -- REVERTED / CANCELLED (FAILED_FINAL), REORGED (TRACKING)
    allocated_at     timestamptz NULL,
    last_submit_at   timestamptz NULL,
    next_resubmit_at timestamptz NULL,
    submit_attempts  integer     NOT NULL DEFAULT 0,
    last_error       text        NULL,
    next_receipt_at  timestamptz NULL,          -- the receipt checker's schedule
    receipt_hash     text        NULL,          -- which signed tx of the nonce was mined
    receipt_kind     text        NULL,
    receipt_block    bigint      NULL,
    receipt_block_hash text      NULL,
    receipt_success  boolean     NULL,
    confirmed_at     timestamptz NULL,          -- final state reached (CONFIRMED or FAILED_FINAL)
    fencing_token    bigint      NOT NULL DEFAULT 0, -- token of the last write (audit)
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CHECK ((nonce IS NULL) = (state = 'CREATED')),
    CHECK ((tx_hash IS NULL) = (state = 'CREATED'))
);
CREATE UNIQUE INDEX managed_tx_request ON managed_tx (submitter, request_id) WHERE request_id IS NOT NULL;
CREATE UNIQUE INDEX managed_tx_nonce ON managed_tx (submitter, nonce) WHERE nonce IS NOT NULL;
CREATE INDEX managed_tx_created ON managed_tx (submitter, tx_id) WHERE state = 'CREATED';
CREATE INDEX managed_tx_pending ON managed_tx (submitter, allocated_at) WHERE state IN ('ALLOCATED', 'TRACKING', 'STUCK');

-- Every signed transaction of a managed tx's nonce (the original, and the
-- REPLACE / CANCEL / PLACEHOLDER ones), stored before its broadcast.
CREATE TABLE managed_tx_signed (
    tx_hash    text        PRIMARY KEY,
    tx_id      bigint      NOT NULL REFERENCES managed_tx (tx_id),
    kind       text        NOT NULL CHECK (kind IN ('ORIGINAL', 'REPLACE', 'CANCEL', 'PLACEHOLDER')),
    raw        bytea       NOT NULL,
    max_fee    numeric(78) NOT NULL, -- wei per gas
    max_tip    numeric(78) NOT NULL, -- wei per gas
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX managed_tx_signed_tx ON managed_tx_signed (tx_id, created_at);

-- The completions feed (§4.4): every final state reached, and STUCK, with a
-- dense seq drawn from tx_completion_seq under its row lock, so seqs commit
-- in order without gaps.
CREATE TABLE tx_completion_seq (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    last bigint  NOT NULL
);
INSERT INTO tx_completion_seq VALUES (true, 0);
CREATE TABLE tx_completions (
    seq        bigint      PRIMARY KEY,
    tx_id      bigint      NOT NULL REFERENCES managed_tx (tx_id),
    submitter  text        NOT NULL,
    request_id text        NULL,
    status     text        NOT NULL CHECK (status IN ('CONFIRMED', 'FAILED_FINAL', 'STUCK')),
    sub_state  text        NULL,
    time       timestamptz NOT NULL DEFAULT now()
);

-- The stuck-resolution hook's audit (§3.7).
CREATE TABLE tx_remediations (
    id            bigserial   PRIMARY KEY,
    submitter     text        NOT NULL,
    tx_id         bigint      NOT NULL REFERENCES managed_tx (tx_id),
    nonce         bigint      NOT NULL,
    action        text        NOT NULL CHECK (action IN ('NOOP', 'CANCEL', 'REPLACE', 'PLACEHOLDER')),
    node_id       text        NOT NULL,
    fencing_token bigint      NOT NULL,
    reason        text        NOT NULL,
    tx_hashes     text[]      NOT NULL DEFAULT '{}', -- signed txs it sent
    time          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tx_remediations_tx ON tx_remediations (tx_id, id);
