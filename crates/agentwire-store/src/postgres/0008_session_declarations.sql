-- What a session declared when it opened (Omnia's `declare`, JSON text),
-- for its resumption; NULL when it declared nothing.
ALTER TABLE sessions ADD COLUMN declaration TEXT;
