-- 0008: the guard against doubled ledger rows moves from a start-up scan to
-- the checkpoint itself.
--
-- spot_ledger has no unique key (0004), so the sink's idempotency rests on
-- core_checkpoint: it writes only seqs above persisted_seq, in the
-- transaction that moves it. Moving the checkpoint back without wiping the
-- tables would make it append the same ledger rows again (orders, trades
-- and wal_events would refuse theirs by primary key). 0007 made the sink
-- check for rows past the checkpoint at start-up through a BRIN index on
-- spot_ledger(seq); on PostgreSQL 15 that index costs every ledger row a
-- revmap lookup and a BRIN tuple deform, ~15% of the backend's CPU per
-- order (BenchmarkWriteBatchHTTPLike: 22.4/24.2/18.3 -> 17.2/20.9/16.3
-- us per order, interleaved runs), and checked only when the sink starts.
--
-- Instead the checkpoint refuses to go back over rows: an UPDATE that lowers
-- persisted_seq, a DELETE or a TRUNCATE of core_checkpoint fails while
-- spot_ledger holds a row past the new value. The scan (no index) runs only
-- on such a move, never on the sink's forward updates. Rebuilding the read
-- model from the WAL stays two statements:
--   TRUNCATE orders, trades, spot_ledger, wal_events;
--   UPDATE core_checkpoint SET persisted_seq = 0;
-- (core_checkpoint itself cannot be in that TRUNCATE: its guard runs before
-- anything is truncated and still sees the ledger rows.)
--
-- The trigger guards the moves made from now on; a database already in that
-- state (which 0007's check refused to write to) fails this migration, so
-- the sink writes nothing to it until the read model is rebuilt.
-- The guard can be bypassed on purpose (ALTER TABLE ... DISABLE TRIGGER,
-- session_replication_role = replica, pg_restore --disable-triggers).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM spot_ledger
               WHERE seq > (SELECT persisted_seq FROM core_checkpoint WHERE id = 1)) THEN
        RAISE EXCEPTION 'spot_ledger holds rows past core_checkpoint.persisted_seq; the sink would write them again'
            USING ERRCODE = 'check_violation',
                  HINT = 'rebuild the read model from the WAL: TRUNCATE orders, trades, spot_ledger, wal_events; UPDATE core_checkpoint SET persisted_seq = 0';
    END IF;
END
$$;

DROP INDEX IF EXISTS spot_ledger_seq_brin;

CREATE FUNCTION core_checkpoint_guard() RETURNS trigger LANGUAGE plpgsql AS $$
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
    IF TG_OP = 'UPDATE' THEN
        RETURN NEW;
    ELSIF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NULL; -- TRUNCATE: a statement trigger's result is ignored
END
$$;

CREATE TRIGGER core_checkpoint_guard BEFORE UPDATE OR DELETE ON core_checkpoint
    FOR EACH ROW EXECUTE FUNCTION core_checkpoint_guard();
CREATE TRIGGER core_checkpoint_guard_truncate BEFORE TRUNCATE ON core_checkpoint
    FOR EACH STATEMENT EXECUTE FUNCTION core_checkpoint_guard();
