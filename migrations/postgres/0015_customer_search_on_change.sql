-- SQLite only: its customer search index is now rewritten only when a searchable value changes
-- (see the SQLite migration of the same number). PostgreSQL's trigram indexes are kept by each
-- update like its other indexes.
SELECT 1;
