-- The outbox's cost on every write (issue #12): retention reads the oldest events by id (the
-- single writer hands ids out in commit order, so they are also the oldest by creation), so the
-- index on created_at, updated by every insert, goes.
DROP INDEX events_created;
