-- The change feed (decisions §11): every change records its event in the writing transaction
-- (a transactional outbox). Feed order is (xid, id): `xid` is the writing transaction's id, and
-- a reader only returns events whose transaction is older than every transaction still running
-- (`xid < pg_snapshot_xmin(pg_current_snapshot())`). Ids are taken before commit, so a later id
-- can commit first; ordering by transaction and waiting for the horizon means an event can never
-- appear behind a cursor that has already passed its place.
CREATE TABLE events (
    company_id  BIGINT NOT NULL REFERENCES companies (id),
    id          BIGINT GENERATED ALWAYS AS IDENTITY,
    xid         BIGINT NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    type        TEXT   COLLATE "C" NOT NULL,
    shop_id     BIGINT,
    data        TEXT   NOT NULL, -- the resource as its GET shows it, JSON
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (company_id, id)
);
CREATE INDEX events_feed ON events (company_id, xid, id);
CREATE INDEX events_created ON events (created_at);

-- How far retention has deleted each company's feed: a cursor at or before it answers 410.
CREATE TABLE event_purges (
    company_id  BIGINT NOT NULL REFERENCES companies (id),
    xid         BIGINT NOT NULL,
    id          BIGINT NOT NULL,
    PRIMARY KEY (company_id)
);
