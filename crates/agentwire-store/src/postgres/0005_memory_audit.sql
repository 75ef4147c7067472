-- 5: the owners' requests to delete all their memories: who, how many,
-- when; never what.
CREATE TABLE memory_audit (
    at BIGINT NOT NULL,
    owner TEXT NOT NULL,
    action TEXT NOT NULL,
    memories BIGINT NOT NULL
);
