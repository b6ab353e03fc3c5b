-- Webhooks (decisions §11). A delivery row is written in the transaction of the change whose
-- event it carries (so a committed change always has its deliveries), and doubles as the
-- delivery log: `attempt`, `status_code`, `error` and `duration_ms` describe the latest attempt.
CREATE TABLE webhooks (
    id             INTEGER PRIMARY KEY,
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
CREATE INDEX webhooks_company ON webhooks (company_id, id);

CREATE TABLE webhook_deliveries (
    id               INTEGER PRIMARY KEY,
    company_id       INTEGER NOT NULL,
    webhook_id       INTEGER NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
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
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (company_id, webhook_id, id);
