-- 0081: resubmission of STUCK txs backs off (issue 33 item 4): the delay
-- before a STUCK tx's next resubmission doubles at each one, from
-- --chain-resubmit-interval up to --chain-resubmit-max-interval
-- (persist/chaintx backoff.go). NULL: not backing off (not STUCK, or a new
-- signed tx / a reorg started the schedule again). Seconds.
ALTER TABLE managed_tx ADD COLUMN resubmit_backoff_s double precision NULL CHECK (resubmit_backoff_s > 0);
