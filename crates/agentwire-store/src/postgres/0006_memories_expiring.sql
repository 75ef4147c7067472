-- 6: expired memories are purged like forgotten ones.
CREATE INDEX memories_expiring ON memories (expires_at) WHERE expires_at IS NOT NULL;
