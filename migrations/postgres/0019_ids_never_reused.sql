-- SQLite only: webhooks, their deliveries and holds take AUTOINCREMENT there, so a deleted
-- row's id is never given again (see the SQLite migration of the same number). PostgreSQL's
-- identity columns never reuse an id already.
SELECT 1;
