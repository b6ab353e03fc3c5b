-- Appointments. Instants are INTEGER microseconds since the epoch. `local_date` / `local_time`
-- are the shop-local calendar date and wall-clock start time, computed from `start_at` and the
-- shop's time zone on every write (and recomputed when a shop's time zone changes), so
-- `filter[date]` / `filter[time]` are exact index lookups. The `*_key` columns hold lower-cased
-- copies for case-insensitive substring filters and sorts.
CREATE TABLE appointments (
    id               INTEGER PRIMARY KEY,
    company_id       INTEGER NOT NULL,
    shop_id          INTEGER NOT NULL,
    customer_id      INTEGER,          -- validated by the application (customers live in 0002)
    vehicle_id       INTEGER,
    repair_order_id  INTEGER,
    employee_id      INTEGER,
    first_name       TEXT    NOT NULL DEFAULT '',
    first_name_key   TEXT    NOT NULL DEFAULT '',
    last_name        TEXT    NOT NULL DEFAULT '',
    last_name_key    TEXT    NOT NULL DEFAULT '',
    email            TEXT,
    year             TEXT    NOT NULL,
    make             TEXT    NOT NULL,
    make_key         TEXT    NOT NULL,
    model            TEXT    NOT NULL,
    model_key        TEXT    NOT NULL,
    reason           TEXT,
    reason_key       TEXT    NOT NULL DEFAULT '', -- '' when reason is NULL: same order on both backends
    home_phone       TEXT    NOT NULL DEFAULT '',
    work_phone       TEXT    NOT NULL DEFAULT '',
    cell_phone       TEXT    NOT NULL DEFAULT '',
    bay_id           INTEGER,          -- the `column`; its title is read from bays
    hours            REAL    NOT NULL DEFAULT 1,
    done             BOOLEAN NOT NULL DEFAULT FALSE,
    source           TEXT    NOT NULL DEFAULT 'API',
    status           TEXT,
    start_at         INTEGER NOT NULL,
    end_at           INTEGER NOT NULL,
    local_date       TEXT    NOT NULL, -- YYYY-MM-DD in the shop's zone
    local_time       TEXT    NOT NULL, -- HH:MM:SS in the shop's zone
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    deleted_at       INTEGER,
    FOREIGN KEY (company_id, shop_id) REFERENCES shops (company_id, id)
);
CREATE INDEX appointments_company ON appointments (company_id, id);
CREATE INDEX appointments_company_start ON appointments (company_id, start_at);
CREATE INDEX appointments_company_shop_start ON appointments (company_id, shop_id, start_at);
CREATE INDEX appointments_company_local ON appointments (company_id, local_date, local_time);
CREATE INDEX appointments_company_created ON appointments (company_id, created_at);
CREATE INDEX appointments_company_updated ON appointments (company_id, updated_at);
CREATE INDEX appointments_company_done ON appointments (company_id, done, id);
CREATE INDEX appointments_company_customer ON appointments (company_id, customer_id, start_at);
