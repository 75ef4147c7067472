-- 3: a tool call's row is known by the seq of its call message. Providers
-- give call ids unique within one model conversation at best (a scripted
-- mock reuses them turn after turn, a model may repeat one within a turn),
-- so (session, call id) would let one call's row stand for another's or
-- fail a turn's write. Only the tests wrote the ledger before this version,
-- so the key changes on an empty table.
ALTER TABLE tool_calls ADD COLUMN call_seq BIGINT;
ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_pkey;
ALTER TABLE tool_calls ADD PRIMARY KEY (session_key, call_seq);
CREATE INDEX tool_calls_by_id ON tool_calls (session_key, call_id);
COMMENT ON COLUMN tool_calls.turn_id IS
    'the seq of the user message that began the call''s turn, in decimal';
