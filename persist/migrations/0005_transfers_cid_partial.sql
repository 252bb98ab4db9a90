-- 0005: the (user_id, cid) uniqueness of transfers_tb covers only transfers
-- that have a cid. Rows with a NULL cid never conflicted (NULLs are
-- distinct), yet every one of them had an entry in the unique index, written
-- at its INSERT and again at each state change (a state change is never a
-- HOT update: state is in idx_transfers_state's predicate). A partial index
-- enforces exactly the same rule and leaves those rows out.
-- Inserts name it as their ON CONFLICT arbiter with its predicate:
-- ON CONFLICT (user_id, cid) WHERE cid IS NOT NULL.
ALTER TABLE transfers_tb DROP CONSTRAINT transfers_tb_user_id_cid_key;
CREATE UNIQUE INDEX transfers_tb_user_cid ON transfers_tb (user_id, cid) WHERE cid IS NOT NULL;
