-- 7: a memory's embedding (little-endian float4s), when the agent's memory
-- has an embedder; searched exactly within a scope, through
-- memories_by_scope (no extension needed).
ALTER TABLE memories ADD COLUMN vector bytea;
