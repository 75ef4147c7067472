-- 4: agent memory. A memory's scope is four strings (empty where its tier
-- has no such key); a live memory's subject (about_kind, about_key) is
-- unique in its scope, the versions it replaced are in memory_history. A
-- forgotten memory keeps its row, hidden from every read, until the grace
-- purges it. The text is searched by whole words ('simple': no stemming, as
-- the SQLite store's index), ranked by ts_rank.
CREATE TABLE memories (
    key BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    tier TEXT NOT NULL,
    owner TEXT NOT NULL,
    agent TEXT NOT NULL,
    facet TEXT NOT NULL,
    scope_token TEXT NOT NULL,
    kind TEXT NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    confidence DOUBLE PRECISION NOT NULL,
    category TEXT,
    about_kind TEXT,
    about_key TEXT,
    purpose TEXT,
    title TEXT,
    summary TEXT,
    session_id TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    expires_at BIGINT,
    forgotten_at BIGINT,
    words TSVECTOR GENERATED ALWAYS AS (
        to_tsvector('simple', content || ' ' || coalesce(title, '') || ' ' || coalesce(summary, ''))
    ) STORED
);
CREATE INDEX memories_by_scope ON memories (owner, agent, facet, tier, updated_at DESC)
    WHERE forgotten_at IS NULL;
CREATE UNIQUE INDEX memories_by_subject
    ON memories (owner, agent, facet, tier, about_kind, about_key)
    WHERE about_kind IS NOT NULL AND forgotten_at IS NULL;
CREATE INDEX memories_forgotten ON memories (forgotten_at) WHERE forgotten_at IS NOT NULL;
CREATE INDEX memories_words ON memories USING GIN (words);
CREATE TABLE memory_history (
    memory_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    confidence DOUBLE PRECISION NOT NULL,
    category TEXT,
    purpose TEXT,
    title TEXT,
    summary TEXT,
    session_id TEXT,
    valid_from BIGINT NOT NULL,
    valid_until BIGINT NOT NULL
);
CREATE INDEX memory_history_by_memory ON memory_history (memory_id);
