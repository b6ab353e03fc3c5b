-- Appointments are cancelled with a soft delete (deleted_at set). The per-shop counters that
-- serve the unfiltered list's total count live appointments only, so a delete moves them too.
DROP TRIGGER appointment_counts_insert;
DROP TRIGGER appointment_counts_delete;
DROP TRIGGER appointment_counts_move;

CREATE TRIGGER appointment_counts_insert AFTER INSERT ON appointments WHEN NEW.deleted_at IS NULL BEGIN
    INSERT INTO appointment_counts (company_id, shop_id, n) VALUES (NEW.company_id, NEW.shop_id, 1)
        ON CONFLICT (company_id, shop_id) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER appointment_counts_delete AFTER DELETE ON appointments WHEN OLD.deleted_at IS NULL BEGIN
    UPDATE appointment_counts SET n = n - 1 WHERE company_id = OLD.company_id AND shop_id = OLD.shop_id;
END;
CREATE TRIGGER appointment_counts_move AFTER UPDATE OF company_id, shop_id, deleted_at ON appointments
    WHEN NEW.company_id <> OLD.company_id OR NEW.shop_id <> OLD.shop_id
        OR (NEW.deleted_at IS NULL) <> (OLD.deleted_at IS NULL) BEGIN
    UPDATE appointment_counts SET n = n - (OLD.deleted_at IS NULL) WHERE company_id = OLD.company_id AND shop_id = OLD.shop_id;
    INSERT INTO appointment_counts (company_id, shop_id, n) VALUES (NEW.company_id, NEW.shop_id, NEW.deleted_at IS NULL)
        ON CONFLICT (company_id, shop_id) DO UPDATE SET n = n + excluded.n;
END;
