-- Appointments are cancelled with a soft delete (deleted_at set). The per-shop counters that
-- serve the unfiltered list's total count live appointments only, so a delete moves them too.
CREATE OR REPLACE FUNCTION appointment_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s SMALLINT := pg_backend_pid() % 16;
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') AND OLD.deleted_at IS NULL THEN
        INSERT INTO appointment_counts AS c (company_id, shop_id, shard, n) VALUES (OLD.company_id, OLD.shop_id, s, -1)
            ON CONFLICT (company_id, shop_id, shard) DO UPDATE SET n = c.n - 1;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.deleted_at IS NULL THEN
        INSERT INTO appointment_counts AS c (company_id, shop_id, shard, n) VALUES (NEW.company_id, NEW.shop_id, s, 1)
            ON CONFLICT (company_id, shop_id, shard) DO UPDATE SET n = c.n + 1;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER appointment_counts_move ON appointments;
CREATE TRIGGER appointment_counts_move AFTER UPDATE OF company_id, shop_id, deleted_at ON appointments
    FOR EACH ROW WHEN (NEW.company_id <> OLD.company_id OR NEW.shop_id <> OLD.shop_id
        OR (NEW.deleted_at IS NULL) <> (OLD.deleted_at IS NULL))
    EXECUTE FUNCTION appointment_counts_track();
