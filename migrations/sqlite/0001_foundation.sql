-- Companies, shops, API keys and shop settings. Instants are INTEGER microseconds since the epoch.
CREATE TABLE companies (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE shops (
    id          INTEGER PRIMARY KEY,
    company_id  INTEGER NOT NULL REFERENCES companies (id),
    name        TEXT    NOT NULL,
    address     TEXT    NOT NULL DEFAULT '',
    city        TEXT    NOT NULL DEFAULT '',
    state       TEXT    NOT NULL DEFAULT '',
    zip         TEXT    NOT NULL DEFAULT '',
    phone       TEXT    NOT NULL DEFAULT '',
    email       TEXT    NOT NULL DEFAULT '',
    website     TEXT    NOT NULL DEFAULT '',
    timezone    TEXT    NOT NULL DEFAULT 'UTC',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
-- Lets child tables reference (company_id, shop_id), so a row can never point at another
-- company's shop.
CREATE UNIQUE INDEX shops_company_id ON shops (company_id, id);

CREATE TABLE api_keys (
    id            INTEGER PRIMARY KEY,
    company_id    INTEGER NOT NULL REFERENCES companies (id),
    name          TEXT    NOT NULL,
    role          TEXT    NOT NULL CHECK (role IN ('read', 'write', 'admin')),
    shop_ids      TEXT,            -- comma-separated shop ids; NULL = every shop of the company
    key_hash      TEXT    NOT NULL UNIQUE, -- hex SHA-256 of the key; the key itself is never stored
    key_prefix    TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER,
    revoked_at    INTEGER
);
CREATE INDEX api_keys_company ON api_keys (company_id, id);

CREATE TABLE bays (
    id          INTEGER PRIMARY KEY,
    company_id  INTEGER NOT NULL,
    shop_id     INTEGER NOT NULL,
    title       TEXT    NOT NULL,
    title_key   TEXT    NOT NULL, -- lower-cased title: uniqueness and case-insensitive order
    sort_order  INTEGER NOT NULL DEFAULT 0,
    active      BOOLEAN NOT NULL DEFAULT TRUE,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    FOREIGN KEY (company_id, shop_id) REFERENCES shops (company_id, id)
);
CREATE UNIQUE INDEX bays_shop_title ON bays (shop_id, title_key);
CREATE INDEX bays_company_shop ON bays (company_id, shop_id, id);

CREATE TABLE sources (
    id          INTEGER PRIMARY KEY,
    company_id  INTEGER NOT NULL,
    shop_id     INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    name_key    TEXT    NOT NULL,
    active      BOOLEAN NOT NULL DEFAULT TRUE,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    FOREIGN KEY (company_id, shop_id) REFERENCES shops (company_id, id)
);
CREATE UNIQUE INDEX sources_shop_name ON sources (shop_id, name_key);
CREATE INDEX sources_company_shop ON sources (company_id, shop_id, id);

CREATE TABLE shop_hours (
    id            INTEGER PRIMARY KEY,
    company_id    INTEGER NOT NULL,
    shop_id       INTEGER NOT NULL,
    day           INTEGER NOT NULL CHECK (day BETWEEN 0 AND 6),
    open_minute   INTEGER NOT NULL, -- minutes after local midnight
    close_minute  INTEGER NOT NULL,
    FOREIGN KEY (company_id, shop_id) REFERENCES shops (company_id, id)
);
CREATE INDEX shop_hours_company_shop ON shop_hours (company_id, shop_id, day, open_minute);
