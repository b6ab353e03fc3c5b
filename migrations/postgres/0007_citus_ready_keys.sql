-- Ready to outgrow one PostgreSQL (docs/scaling.md): Citus distributes tenant tables by
-- company_id and requires it in every primary key and unique constraint, and in the foreign keys
-- between distributed tables. Every tenant table now has PRIMARY KEY (company_id, id), and the
-- per-shop uniqueness rules lead with company_id. `companies` and `api_keys` stay keyed by id:
-- they are small and become Citus reference tables (copied to every node), which is also what
-- lets a key be found by its hash alone.
--
-- The same migration shards the appointment and customer counters: one row per shop made every
-- concurrent write to a shop wait for the previous writer's commit (issue #11 measured POST
-- /appointments at 2,976/s against 3,515/s without the counter). Each writer now adds to one of
-- 16 rows of its shop, chosen by its backend, and readers sum them.

-- Primary keys led by company_id. Where a unique (company_id, id) index exists it becomes the key.
ALTER TABLE shops DROP CONSTRAINT shops_pkey;
ALTER TABLE shops ADD CONSTRAINT shops_pkey PRIMARY KEY USING INDEX shops_company_id;
ALTER TABLE customers DROP CONSTRAINT customers_pkey;
ALTER TABLE customers ADD CONSTRAINT customers_pkey PRIMARY KEY USING INDEX customers_company_id;
ALTER TABLE accounts_receivable DROP CONSTRAINT accounts_receivable_pkey;
ALTER TABLE accounts_receivable ADD CONSTRAINT accounts_receivable_pkey PRIMARY KEY USING INDEX accounts_receivable_company_id;

ALTER TABLE bays DROP CONSTRAINT bays_pkey, ADD CONSTRAINT bays_pkey PRIMARY KEY (company_id, id);
ALTER TABLE sources DROP CONSTRAINT sources_pkey, ADD CONSTRAINT sources_pkey PRIMARY KEY (company_id, id);
ALTER TABLE shop_hours DROP CONSTRAINT shop_hours_pkey, ADD CONSTRAINT shop_hours_pkey PRIMARY KEY (company_id, id);
ALTER TABLE ship_tos DROP CONSTRAINT ship_tos_pkey, ADD CONSTRAINT ship_tos_pkey PRIMARY KEY (company_id, id);
ALTER TABLE account_payments DROP CONSTRAINT account_payments_pkey, ADD CONSTRAINT account_payments_pkey PRIMARY KEY (company_id, id);
ALTER TABLE appointments DROP CONSTRAINT appointments_pkey, ADD CONSTRAINT appointments_pkey PRIMARY KEY (company_id, id);
DROP INDEX appointments_company;

-- Per-shop uniqueness, led by company_id.
DROP INDEX bays_shop_title;
CREATE UNIQUE INDEX bays_shop_title ON bays (company_id, shop_id, title_key);
DROP INDEX sources_shop_name;
CREATE UNIQUE INDEX sources_shop_name ON sources (company_id, shop_id, name_key);

-- Sharded counters.
ALTER TABLE appointment_counts ADD COLUMN shard SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE appointment_counts DROP CONSTRAINT appointment_counts_pkey, ADD PRIMARY KEY (company_id, shop_id, shard);
ALTER TABLE customer_counts ADD COLUMN shard SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE customer_counts DROP CONSTRAINT customer_counts_pkey, ADD PRIMARY KEY (company_id, shop_id, shard);

CREATE OR REPLACE FUNCTION appointment_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s SMALLINT := pg_backend_pid() % 16;
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO appointment_counts AS c (company_id, shop_id, shard, n) VALUES (OLD.company_id, OLD.shop_id, s, -1)
            ON CONFLICT (company_id, shop_id, shard) DO UPDATE SET n = c.n - 1;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO appointment_counts AS c (company_id, shop_id, shard, n) VALUES (NEW.company_id, NEW.shop_id, s, 1)
            ON CONFLICT (company_id, shop_id, shard) DO UPDATE SET n = c.n + 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION customer_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s SMALLINT := pg_backend_pid() % 16;
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO customer_counts AS c (company_id, shop_id, shard, n) VALUES (OLD.company_id, OLD.shop_id, s, -1)
            ON CONFLICT (company_id, shop_id, shard) DO UPDATE SET n = c.n - 1;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO customer_counts AS c (company_id, shop_id, shard, n) VALUES (NEW.company_id, NEW.shop_id, s, 1)
            ON CONFLICT (company_id, shop_id, shard) DO UPDATE SET n = c.n + 1;
    END IF;
    RETURN NULL;
END
$$;
