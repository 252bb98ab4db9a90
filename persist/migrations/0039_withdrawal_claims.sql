-- 0039: settle a withdrawal whose commit had an unknown outcome (the
-- connection died around COMMIT). Create allocates the withdrawal_id first
-- and its transaction's first write is a claim row (fenced = false). After
-- an unknown outcome the service inserts the claim itself with fenced = true:
-- it either conflicts with the committed claim (the withdrawal exists) or
-- wins, and then the original transaction can never commit (its claim insert
-- conflicts): nothing happened, for good. Either way the client is told a
-- certain answer, never a bare error after which a retry could withdraw twice.
CREATE TABLE withdrawal_claims (
    withdrawal_id bigint  PRIMARY KEY,
    fenced        boolean NOT NULL -- true: claimed by the settle path; that id never holds a withdrawal
);
