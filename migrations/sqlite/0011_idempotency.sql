-- Idempotency keys (decisions §12): one row per (API key, Idempotency-Key) for 24 hours. A
-- request reserves its row (state 'running', with a lease), and the transaction of its write
-- turns it into 'done' with the response to replay, so a write and its stored answer commit
-- together. A failed request deletes its reservation.
CREATE TABLE idempotency_keys (
    company_id    INTEGER NOT NULL REFERENCES companies (id),
    api_key_id    INTEGER NOT NULL,
    idem_key      TEXT   NOT NULL,
    fingerprint   TEXT   NOT NULL, -- SHA-256 of method, path and body
    state         TEXT   NOT NULL CHECK (state IN ('running', 'done')),
    token         TEXT   NOT NULL, -- which attempt holds the reservation
    locked_until  INTEGER NOT NULL, -- a running reservation older than this may be taken over
    status        INTEGER,
    location      TEXT,
    body          TEXT,
    expires_at    INTEGER NOT NULL,
    PRIMARY KEY (company_id, api_key_id, idem_key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
