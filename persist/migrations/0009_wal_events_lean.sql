-- 0009: wal_events loses its two btrees, like spot_ledger did in 0004.
--
-- At ~1.5 audit rows per order they cost the sink's backend about 15% of
-- its CPU per order (BenchmarkWriteBatchHTTPLike, batch 4096, five
-- interleaved runs each: median 13.35 us per order with both, 11.35 without
-- either; without only one of them 13.55-13.8: COPY into a table with no
-- index at all skips the per-row index insertion step altogether). Nothing
-- in the exchange reads wal_events; it is the audit trail, read whole or by
-- seq range by operators, who can add an index where they query it
-- (CREATE INDEX CONCURRENTLY, better on a replica).
--
-- Uniqueness of (seq, idx) now rests, as for spot_ledger, on the sink:
-- it writes only seqs above core_checkpoint.persisted_seq, in the
-- transaction that moves it. The checkpoint guard of 0008 is extended to
-- wal_events: moving the checkpoint back (UPDATE, DELETE, TRUNCATE) fails
-- while wal_events holds a row past the new value.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM wal_events
               WHERE seq > (SELECT persisted_seq FROM core_checkpoint WHERE id = 1)) THEN
        RAISE EXCEPTION 'wal_events holds rows past core_checkpoint.persisted_seq; the sink would write them again'
            USING ERRCODE = 'check_violation',
                  HINT = 'rebuild the read model from the WAL: TRUNCATE orders, trades, spot_ledger, wal_events; UPDATE core_checkpoint SET persisted_seq = 0';
    END IF;
END
$$;

ALTER TABLE wal_events DROP CONSTRAINT IF EXISTS wal_events_pkey;
DROP INDEX IF EXISTS wal_events_order_idx;

CREATE OR REPLACE FUNCTION core_checkpoint_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    target bigint := 0; -- the checkpoint after the change (DELETE, TRUNCATE: none)
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.persisted_seq >= OLD.persisted_seq THEN
            RETURN NEW;
        END IF;
        target := NEW.persisted_seq;
    END IF;
    IF EXISTS (SELECT 1 FROM spot_ledger WHERE seq > target) THEN
        RAISE EXCEPTION 'core_checkpoint: spot_ledger holds rows past seq %; the sink would write them again', target
            USING ERRCODE = 'check_violation',
                  HINT = 'to rebuild the read model from the WAL: TRUNCATE orders, trades, spot_ledger, wal_events; UPDATE core_checkpoint SET persisted_seq = 0';
    END IF;
    IF EXISTS (SELECT 1 FROM wal_events WHERE seq > target) THEN
        RAISE EXCEPTION 'core_checkpoint: wal_events holds rows past seq %; the sink would write them again', target
            USING ERRCODE = 'check_violation',
                  HINT = 'to rebuild the read model from the WAL: TRUNCATE orders, trades, spot_ledger, wal_events; UPDATE core_checkpoint SET persisted_seq = 0';
    END IF;
    IF TG_OP = 'UPDATE' THEN
        RETURN NEW;
    ELSIF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NULL; -- TRUNCATE: a statement trigger's result is ignored
END
$$;
