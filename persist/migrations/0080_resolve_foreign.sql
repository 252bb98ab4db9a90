-- 0080: the operator's way out of a nonce taken outside the exchange (issue
-- 33 item 1): the audit accepts the action RESOLVE_FOREIGN
-- (persist/chaintx resolveForeign: the nonce is final on chain with a tx
-- none of ours; the tx becomes FAILED_FINAL sub_state FOREIGN_NONCE).
ALTER TABLE tx_remediations DROP CONSTRAINT tx_remediations_action_check;
ALTER TABLE tx_remediations ADD CONSTRAINT tx_remediations_action_check
    CHECK (action IN ('NOOP', 'CANCEL', 'REPLACE', 'PLACEHOLDER', 'RESOLVE_FOREIGN'));
