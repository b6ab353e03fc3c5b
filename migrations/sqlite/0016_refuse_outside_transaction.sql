-- PostgreSQL only: a function that a statement sent without BEGIN and COMMIT calls to undo
-- itself when it needs a transaction (see the PostgreSQL migration of the same number). SQLite's
-- writer commits a whole change in one hand-off already.
SELECT 1;
