-- 0006: the read model belongs to one WAL. core_checkpoint records the id
-- of the data dir whose WAL the sink follows (<data-dir>/wal.id, made on
-- first start); a sink started on another data dir finds a different id and
-- writes nothing (its seqs, order ids and trade ids are another history).
-- NULL until a sink adopts the database (existing databases: on their
-- next start, if their checkpoint is not past that WAL's end).
ALTER TABLE core_checkpoint ADD COLUMN wal_id text;
