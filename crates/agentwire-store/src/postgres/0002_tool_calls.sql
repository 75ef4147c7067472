-- 2: the tool-call ledger (scale-out.md §5, §6): one row per tool call of a
-- turn, server or client side, and where it stands. Nothing writes it yet;
-- it exists so that replicas can agree on a pending client call's answer
-- (first answer wins) and mark an interrupted turn's open calls denied.
CREATE TABLE tool_calls (
    session_key BIGINT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
    call_id TEXT COLLATE "C" NOT NULL,
    turn_id TEXT NOT NULL,
    side TEXT NOT NULL CHECK (side IN ('server', 'client')),
    name TEXT NOT NULL,
    -- A digest of the arguments (never the arguments: they are user data).
    args_digest TEXT,
    state TEXT NOT NULL
        CHECK (state IN ('requested', 'acked', 'running', 'answered', 'denied', 'cancelled')),
    -- The outcome once answered, denied or cancelled.
    outcome JSONB,
    idempotency_key TEXT,
    requested_at BIGINT NOT NULL,
    acked_at BIGINT,
    finished_at BIGINT,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (session_key, call_id)
);

-- A session's calls that are still open (what a crash recovery denies).
CREATE INDEX tool_calls_open ON tool_calls (session_key)
    WHERE state IN ('requested', 'acked', 'running');
