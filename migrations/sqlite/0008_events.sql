-- The change feed (decisions §11): every change records its event in the writing transaction
-- (a transactional outbox). SQLite has one writer, so ids are handed out in commit order: `xid`
-- stays 0 and the feed is ordered by (xid, id) as on PostgreSQL (see its 0008). AUTOINCREMENT
-- keeps ids growing even when retention has deleted every event.
CREATE TABLE events (
    company_id  INTEGER NOT NULL REFERENCES companies (id),
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    xid         INTEGER NOT NULL DEFAULT 0,
    type        TEXT    NOT NULL,
    shop_id     INTEGER,
    data        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX events_feed ON events (company_id, xid, id);
CREATE INDEX events_created ON events (created_at);

CREATE TABLE event_purges (
    company_id  INTEGER PRIMARY KEY REFERENCES companies (id),
    xid         INTEGER NOT NULL,
    id          INTEGER NOT NULL
);
