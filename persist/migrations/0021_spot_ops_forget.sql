-- 0021: the watermark of the job that makes the core forget the spot
-- operation records (req_ids) of terminal transfers (cmd/exchange
-- forget.go): every transfer with a req_id at or below through_req_id is
-- terminal and its records are forgotten. req_ids are ULIDs, so this is
-- also creation order, and the primary key serves the scan.
CREATE TABLE spot_ops_forget (
    id             smallint    PRIMARY KEY CHECK (id = 1),
    through_req_id text        NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
INSERT INTO spot_ops_forget (id, through_req_id) VALUES (1, '');
