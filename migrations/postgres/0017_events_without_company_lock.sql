-- The outbox's cost on every write (issue #12): the events' foreign key to companies checked
-- each event with `SELECT ... FOR KEY SHARE` on its company's row. All of a company's writers
-- lock that one row at once, so PostgreSQL records a new MultiXact (and a WAL record) for every
-- event; through HTTP the key cost a create about a tenth of its throughput (bench/RESULTS.md).
-- An event's company is the company of the change that writes it, taken from the authenticated
-- key, and companies are never deleted, so the check guarded nothing that can happen. Other
-- tables keep their keys; SQLite keeps this one (its check is an index probe and locks nothing).
ALTER TABLE events DROP CONSTRAINT events_company_id_fkey;
