-- The outbox's cost on every write (issue #12): one B-tree per event instead of three. The feed
-- reads by (company_id, xid, id), unique since id is, so that becomes the primary key (company_id
-- first, as Citus needs); retention finds old events through a BRIN index on created_at (a few
-- pages summarising block ranges, which an append-only table keeps in creation order) instead of
-- a B-tree updated by every insert.
ALTER TABLE events DROP CONSTRAINT events_pkey;
DROP INDEX events_feed;
DROP INDEX events_created;
ALTER TABLE events ADD PRIMARY KEY (company_id, xid, id);
CREATE INDEX events_created ON events USING brin (created_at);
