-- How many appointments each shop has, kept by triggers in the writing transaction, so the
-- unfiltered appointment list reads its total from here instead of counting a million rows on
-- every page (issue #5: the COUNT(*) made the default page 100x slower at 1M rows).
CREATE TABLE appointment_counts (
    company_id  INTEGER NOT NULL,
    shop_id     INTEGER NOT NULL,
    n           INTEGER NOT NULL,
    PRIMARY KEY (company_id, shop_id)
);
INSERT INTO appointment_counts (company_id, shop_id, n)
    SELECT company_id, shop_id, COUNT(*) FROM appointments GROUP BY company_id, shop_id;

CREATE TRIGGER appointment_counts_insert AFTER INSERT ON appointments BEGIN
    INSERT INTO appointment_counts (company_id, shop_id, n) VALUES (NEW.company_id, NEW.shop_id, 1)
        ON CONFLICT (company_id, shop_id) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER appointment_counts_delete AFTER DELETE ON appointments BEGIN
    UPDATE appointment_counts SET n = n - 1 WHERE company_id = OLD.company_id AND shop_id = OLD.shop_id;
END;
CREATE TRIGGER appointment_counts_move AFTER UPDATE OF company_id, shop_id ON appointments
    WHEN NEW.company_id <> OLD.company_id OR NEW.shop_id <> OLD.shop_id BEGIN
    UPDATE appointment_counts SET n = n - 1 WHERE company_id = OLD.company_id AND shop_id = OLD.shop_id;
    INSERT INTO appointment_counts (company_id, shop_id, n) VALUES (NEW.company_id, NEW.shop_id, 1)
        ON CONFLICT (company_id, shop_id) DO UPDATE SET n = n + 1;
END;
