-- Slot holds (decisions §14): a bay reserved for a short time while a customer books.
--
-- The guarantee lives in the schema: an exclusion constraint refuses two live holds on the same
-- bay whose times overlap, whichever replica inserts them. A hold stops being live when it is
-- booked, released, or retired once expired (the insert of a new hold retires the expired holds
-- it overlaps, in its own transaction, before inserting). Rows are kept a day after they expire
-- so a late booking with a used or expired hold gets 409 rather than "unknown hold".
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE holds (
    company_id  BIGINT NOT NULL REFERENCES companies (id),
    id          BIGINT GENERATED ALWAYS AS IDENTITY,
    shop_id     BIGINT NOT NULL,
    bay_id      BIGINT NOT NULL,
    start_at    BIGINT NOT NULL,
    end_at      BIGINT NOT NULL CHECK (end_at > start_at),
    hours       DOUBLE PRECISION NOT NULL,
    expires_at  BIGINT NOT NULL,
    state       TEXT   NOT NULL CHECK (state IN ('held', 'booked', 'released', 'expired')),
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (company_id, id),
    CONSTRAINT holds_no_overlap EXCLUDE USING gist (
        company_id WITH =, bay_id WITH =, int8range(start_at, end_at) WITH &&
    ) WHERE (state = 'held')
);
-- Availability reads a shop's live holds by time.
CREATE INDEX holds_shop_time ON holds (company_id, shop_id, start_at) WHERE state = 'held';
-- The cleanup deletes by expiry.
CREATE INDEX holds_expiry ON holds (expires_at);
