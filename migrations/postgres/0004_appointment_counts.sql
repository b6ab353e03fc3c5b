-- How many appointments each shop has, kept by triggers in the writing transaction, so the
-- unfiltered appointment list reads its total from here instead of counting a million rows on
-- every page (issue #5: the COUNT(*) made the default page 100x slower at 1M rows). One row per
-- shop: concurrent writers to the same shop queue on it only until their commit.
CREATE TABLE appointment_counts (
    company_id  BIGINT NOT NULL,
    shop_id     BIGINT NOT NULL,
    n           BIGINT NOT NULL,
    PRIMARY KEY (company_id, shop_id)
);
INSERT INTO appointment_counts (company_id, shop_id, n)
    SELECT company_id, shop_id, COUNT(*) FROM appointments GROUP BY company_id, shop_id;

CREATE FUNCTION appointment_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE appointment_counts SET n = n - 1 WHERE company_id = OLD.company_id AND shop_id = OLD.shop_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO appointment_counts AS c (company_id, shop_id, n) VALUES (NEW.company_id, NEW.shop_id, 1)
            ON CONFLICT (company_id, shop_id) DO UPDATE SET n = c.n + 1;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER appointment_counts_insert_delete AFTER INSERT OR DELETE ON appointments
    FOR EACH ROW EXECUTE FUNCTION appointment_counts_track();
CREATE TRIGGER appointment_counts_move AFTER UPDATE OF company_id, shop_id ON appointments
    FOR EACH ROW WHEN (NEW.company_id <> OLD.company_id OR NEW.shop_id <> OLD.shop_id)
    EXECUTE FUNCTION appointment_counts_track();
