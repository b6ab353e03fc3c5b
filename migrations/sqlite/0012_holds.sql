-- Slot holds (decisions §14): a bay reserved for a short time while a customer books.
--
-- SQLite has one writer, and every hold is written inside one transaction on it; the trigger
-- below makes the rule the database's own all the same: no two live holds on the same bay whose
-- times overlap (PostgreSQL enforces the same with an exclusion constraint). A hold stops being
-- live when it is booked, released, or retired once expired (the insert of a new hold retires
-- the expired holds it overlaps first). Rows are kept a day after they expire so a late booking
-- with a used or expired hold gets 409 rather than "unknown hold".
CREATE TABLE holds (
    id          INTEGER PRIMARY KEY,
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
