-- 0085: withdrawal limits (package persist/withdraw, issue 33 item 6).
-- Per user and asset, a daily amount and count (UTC day, database time); the
-- flags give the defaults, a row of withdrawal_limits overrides them for one
-- user and asset (0 = no limit). withdrawal_usage is what each user took per
-- asset and UTC day: Create adds to it with one conditional upsert in the
-- transaction that debits FUNDING (the row lock makes concurrent requests
-- queue; the WHERE refuses the one that would pass the limit, and the
-- refusal rolls back the whole withdrawal); the settler gives it back in the
-- refund's transaction (CANCELLED). A user with at least one
-- withdrawal_allowlist row may withdraw only to those addresses.
CREATE TABLE withdrawal_limits (
    user_id      bigint      NOT NULL CHECK (user_id > 0),
    asset_id     integer     NOT NULL CHECK (asset_id > 0),
    daily_amount bigint      NOT NULL CHECK (daily_amount >= 0), -- asset units (the exchange's scale); 0 = no limit
    daily_count  integer     NOT NULL CHECK (daily_count >= 0),  -- withdrawals per UTC day; 0 = no limit
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, asset_id)
);

CREATE TABLE withdrawal_usage (
    user_id  bigint  NOT NULL,
    asset_id integer NOT NULL,
    day      date    NOT NULL, -- UTC day of the withdrawals' created_at
    amount   bigint  NOT NULL CHECK (amount >= 0), -- asset units, of withdrawals not CANCELLED
    count    integer NOT NULL CHECK (count >= 0),
    PRIMARY KEY (user_id, asset_id, day)
);

CREATE TABLE withdrawal_allowlist (
    user_id  bigint      NOT NULL CHECK (user_id > 0),
    address  text        NOT NULL, -- 0x + 40 lower-case hex
    added_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, address)
);
