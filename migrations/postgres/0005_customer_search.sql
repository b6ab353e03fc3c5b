-- SQLite's migration 0005 adds a trigram index for customer substring search. PostgreSQL has
-- had trigram GIN indexes on the same keys since 0002 (pg_trgm), so nothing changes here; the
-- file keeps the two backends' version numbers in step.
SELECT 1;
