-- 1: sessions, their messages, and their summaries with due times.
--
-- Ids and owners compare bytewise (COLLATE "C"), as SQLite's do, so an
-- owner's listing pages the same way on both stores whatever the cluster's
-- locale. Timestamps are the port's: integer nanoseconds since the epoch.
-- A session has an integer key; messages are keyed by (key, seq), so the
-- 36-character id is stored once and never widens the messages index.
CREATE TABLE sessions (
    key BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT COLLATE "C" NOT NULL UNIQUE,
    agent TEXT NOT NULL,
    namespace TEXT NOT NULL,
    owner TEXT COLLATE "C",
    created_at BIGINT NOT NULL,
    last_active_at BIGINT NOT NULL,
    -- The highest seq stored (-1: none yet), advanced by every append.
    seq_head BIGINT NOT NULL DEFAULT -1,
    -- The fence of the turn lease that last wrote (scale-out.md §3); not
    -- checked yet.
    turn_fence BIGINT NOT NULL DEFAULT 0,
    summary TEXT,
    summary_created_at BIGINT,
    summary_due_at BIGINT,
    -- Until when a replica's summary job holds the due summary
    -- (PgStore::claim_due_summaries).
    summary_claimed_until BIGINT
);

-- The owner's listing, newest first; anonymous sessions are never listed.
CREATE INDEX sessions_by_owner ON sessions (owner, last_active_at DESC, id DESC)
    WHERE owner IS NOT NULL;
CREATE INDEX sessions_summary_due ON sessions (summary_due_at)
    WHERE summary_due_at IS NOT NULL;

CREATE TABLE messages (
    session_key BIGINT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    parts JSONB,
    metadata JSONB,
    -- The turn that wrote the message; not written yet.
    turn_id TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_key, seq)
);
