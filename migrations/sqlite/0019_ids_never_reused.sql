-- Ids of rows that are deleted (webhooks with their deliveries; holds, purged a day after they
-- expire) are never given again. With `INTEGER PRIMARY KEY` alone SQLite gives the largest id
-- once more after its row is deleted, so a client's stale id (a DELETE retried after a timeout)
-- named the next webhook created. AUTOINCREMENT keeps ids rising, as PostgreSQL's identity
-- columns do. SQLite cannot add it to a table: each is built again under its name, rows,
-- indexes and trigger included.
CREATE TABLE webhooks_next (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    company_id     INTEGER NOT NULL REFERENCES companies (id),
    url            TEXT    NOT NULL,
    events         TEXT    NOT NULL, -- JSON array of patterns: "appointment.created", "appointment.*", "*"
    description    TEXT    NOT NULL,
    shop_ids       TEXT,             -- comma-separated; NULL = every shop and company-wide events
    secret         TEXT    NOT NULL, -- whsec_...: needed in clear to sign
    enabled        BOOLEAN NOT NULL,
    failing_since  INTEGER,          -- start of the current run of failed attempts
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
INSERT INTO webhooks_next SELECT * FROM webhooks;

CREATE TABLE webhook_deliveries_next (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    company_id       INTEGER NOT NULL,
    webhook_id       INTEGER NOT NULL REFERENCES webhooks_next (id) ON DELETE CASCADE,
    event_id         TEXT    NOT NULL,
    event_type       TEXT    NOT NULL,
    payload          TEXT    NOT NULL, -- the event JSON, sent as is on every attempt
    state            TEXT    NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed')),
    attempt          INTEGER NOT NULL,
    next_attempt_at  INTEGER,          -- pending: when it is due (or when a claimed attempt's lease ends)
    status_code      INTEGER,
    error            TEXT,
    duration_ms      INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
INSERT INTO webhook_deliveries_next SELECT * FROM webhook_deliveries;

DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
-- Renaming also points the deliveries' foreign key, and the ids' counters, at the new names.
ALTER TABLE webhooks_next RENAME TO webhooks;
ALTER TABLE webhook_deliveries_next RENAME TO webhook_deliveries;
CREATE INDEX webhooks_company ON webhooks (company_id, id);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (company_id, webhook_id, id);

CREATE TABLE holds_next (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    company_id  INTEGER NOT NULL REFERENCES companies (id),
    shop_id     INTEGER NOT NULL,
    bay_id      INTEGER NOT NULL,
    start_at    INTEGER NOT NULL,
    end_at      INTEGER NOT NULL CHECK (end_at > start_at),
    hours       REAL    NOT NULL,
    expires_at  INTEGER NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('held', 'booked', 'released', 'expired')),
    created_at  INTEGER NOT NULL
);
INSERT INTO holds_next SELECT * FROM holds;
DROP TABLE holds;
ALTER TABLE holds_next RENAME TO holds;
CREATE INDEX holds_bay_time ON holds (company_id, bay_id, start_at) WHERE state = 'held';
CREATE INDEX holds_shop_time ON holds (company_id, shop_id, start_at) WHERE state = 'held';
CREATE INDEX holds_expiry ON holds (expires_at);

CREATE TRIGGER holds_no_overlap BEFORE INSERT ON holds
WHEN NEW.state = 'held' AND EXISTS (
    SELECT 1 FROM holds h
    WHERE h.company_id = NEW.company_id AND h.bay_id = NEW.bay_id AND h.state = 'held'
      AND h.start_at < NEW.end_at AND h.end_at > NEW.start_at
)
BEGIN
    SELECT RAISE(ABORT, 'holds_no_overlap');
END;
