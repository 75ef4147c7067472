-- 9: the ledger written as calls move: a turn records each tool call when
-- it is requested, acknowledged and ended, before the call's message has a
-- seq (messages get theirs when the turn ends), so that a replica taking a
-- session over reads which calls ran. A row is known by its turn and its
-- place among the turn's calls (`call_ordinal`); `call_seq` links it to its
-- message once the turn's end stored it. `fence` is the turn lease's that
-- wrote it: a write under a later lease settles what an earlier one left
-- open. Rows of earlier versions keep their call_seq and have no ordinal;
-- a binary of an earlier version still inserts rows as it did.
ALTER TABLE tool_calls ADD COLUMN call_ordinal INTEGER;
ALTER TABLE tool_calls ADD COLUMN fence BIGINT;
ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_pkey;
ALTER TABLE tool_calls ALTER COLUMN call_seq DROP NOT NULL;
CREATE UNIQUE INDEX tool_calls_by_seq ON tool_calls (session_key, call_seq);
CREATE UNIQUE INDEX tool_calls_by_turn ON tool_calls (session_key, turn_id, call_ordinal);
