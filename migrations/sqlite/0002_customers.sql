-- Customers, their ship-to addresses and accounts receivable. Money is INTEGER cents; calendar
-- dates are TEXT 'YYYY-MM-DD' (sorts and compares correctly); instants are INTEGER microseconds.
CREATE TABLE customers (
    id               INTEGER PRIMARY KEY,
    company_id       INTEGER NOT NULL,
    shop_id          INTEGER NOT NULL,
    business_name    TEXT    NOT NULL DEFAULT '',
    first_name       TEXT    NOT NULL,
    last_name        TEXT    NOT NULL,
    address          TEXT    NOT NULL,
    city             TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    zip              TEXT    NOT NULL,
    home_phone       TEXT    NOT NULL DEFAULT '',
    work_phone       TEXT    NOT NULL DEFAULT '',
    cell_phone       TEXT    NOT NULL DEFAULT '',
    fax              TEXT    NOT NULL DEFAULT '',
    email            TEXT,
    comments         TEXT    NOT NULL DEFAULT '',
    cell_provider    TEXT    NOT NULL DEFAULT '',
    active           BOOLEAN NOT NULL DEFAULT TRUE,
    tax_exempt       BOOLEAN NOT NULL DEFAULT FALSE,
    allow_marketing  BOOLEAN NOT NULL DEFAULT FALSE,
    credit_limit     INTEGER,          -- cents; NULL = never set
    extension        TEXT    NOT NULL DEFAULT '',
    customer_type    TEXT    NOT NULL DEFAULT '',
    terms            TEXT    NOT NULL DEFAULT '', -- also served as customer_pay_type
    customer_number  TEXT    NOT NULL DEFAULT '',
    -- Shadow columns for filters and sorts: lower-cased text, and the digits of the four phones
    -- as '|home|work|cell|fax|' so LIKE '%digits%' matches inside one number only.
    first_name_key     TEXT NOT NULL,
    last_name_key      TEXT NOT NULL,
    business_name_key  TEXT NOT NULL,
    address_key        TEXT NOT NULL,
    phone_digits       TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    FOREIGN KEY (company_id, shop_id) REFERENCES shops (company_id, id)
);
CREATE UNIQUE INDEX customers_company_id ON customers (company_id, id);
CREATE UNIQUE INDEX customers_company_number ON customers (company_id, customer_number) WHERE customer_number <> '';
CREATE INDEX customers_company_shop ON customers (company_id, shop_id, id);
CREATE INDEX customers_company_first_name ON customers (company_id, first_name_key, id);
CREATE INDEX customers_company_last_name ON customers (company_id, last_name_key, id);
CREATE INDEX customers_company_business_name ON customers (company_id, business_name_key, id);
CREATE INDEX customers_company_address ON customers (company_id, address_key, id);
CREATE INDEX customers_company_phone ON customers (company_id, phone_digits);
CREATE INDEX customers_company_updated ON customers (company_id, updated_at);

CREATE TABLE ship_tos (
    id           INTEGER PRIMARY KEY,
    company_id   INTEGER NOT NULL,
    customer_id  INTEGER NOT NULL,
    number       TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    name_key     TEXT    NOT NULL, -- lower-cased name, for sorting
    address      TEXT    NOT NULL,
    city         TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    zip          TEXT    NOT NULL,
    email        TEXT,
    work_phone   TEXT    NOT NULL,
    fax          TEXT    NOT NULL,
    home_phone   TEXT    NOT NULL,
    cell_phone   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    FOREIGN KEY (company_id, customer_id) REFERENCES customers (company_id, id)
);
CREATE UNIQUE INDEX ship_tos_customer_number ON ship_tos (company_id, customer_id, number);
CREATE INDEX ship_tos_company_customer ON ship_tos (company_id, customer_id, id);

CREATE TABLE accounts_receivable (
    id               INTEGER PRIMARY KEY,
    company_id       INTEGER NOT NULL,
    shop_id          INTEGER NOT NULL,
    customer_id      INTEGER NOT NULL,
    reference        TEXT    NOT NULL,
    repair_order_id  INTEGER,
    date             TEXT    NOT NULL, -- invoice date
    due_date         TEXT    NOT NULL,
    actual_date      TEXT    NOT NULL, -- posting date
    amount           INTEGER NOT NULL, -- cents
    balance          INTEGER NOT NULL, -- cents; 0 = paid
    payment_date     TEXT,             -- date of the last payment
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    FOREIGN KEY (company_id, shop_id) REFERENCES shops (company_id, id),
    FOREIGN KEY (company_id, customer_id) REFERENCES customers (company_id, id),
    CHECK (balance >= 0 AND balance <= amount)
);
CREATE UNIQUE INDEX accounts_receivable_company_id ON accounts_receivable (company_id, id);
CREATE INDEX accounts_receivable_company_customer ON accounts_receivable (company_id, customer_id, id);

CREATE TABLE account_payments (
    id                      INTEGER PRIMARY KEY,
    company_id              INTEGER NOT NULL,
    customer_id             INTEGER NOT NULL,
    accounts_receivable_id  INTEGER NOT NULL,
    amount                  INTEGER NOT NULL, -- cents
    date                    TEXT    NOT NULL,
    created_at              INTEGER NOT NULL,
    FOREIGN KEY (company_id, accounts_receivable_id) REFERENCES accounts_receivable (company_id, id),
    FOREIGN KEY (company_id, customer_id) REFERENCES customers (company_id, id)
);
CREATE INDEX account_payments_company_customer ON account_payments (company_id, customer_id, id);
CREATE INDEX account_payments_company_receivable ON account_payments (company_id, accounts_receivable_id, id);
