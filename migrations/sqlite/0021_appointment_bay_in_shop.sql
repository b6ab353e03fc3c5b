-- An appointment's bay is a bay of its shop, and the database keeps it so. A create or an
-- update validates its bay before the writer runs it; a move of the bay to another shop run by
-- the writer in between made it store an appointment of one shop on a bay of another. Now that
-- write fails (the API answers 422 on `column`). The writer runs one change at a time, so a
-- move's own check (bays::store::move_blocked) sees every appointment stored before it, and
-- these triggers refuse every one after it; the last one refuses a move of a bay that
-- appointments of its shop use, whoever writes it. (PostgreSQL: a foreign key. SQLite cannot
-- add one to a table without copying it.)
CREATE TRIGGER appointments_bay_in_shop BEFORE INSERT ON appointments
WHEN NEW.bay_id IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM bays b WHERE b.company_id = NEW.company_id AND b.id = NEW.bay_id AND b.shop_id = NEW.shop_id
)
BEGIN
    SELECT RAISE(ABORT, 'appointments_bay_in_shop');
END;

-- As PostgreSQL's key: checked when the bay or the shop changes.
CREATE TRIGGER appointments_bay_in_shop_on_update BEFORE UPDATE OF shop_id, bay_id ON appointments
WHEN NEW.bay_id IS NOT NULL AND (NEW.bay_id IS NOT OLD.bay_id OR NEW.shop_id <> OLD.shop_id) AND NOT EXISTS (
    SELECT 1 FROM bays b WHERE b.company_id = NEW.company_id AND b.id = NEW.bay_id AND b.shop_id = NEW.shop_id
)
BEGIN
    SELECT RAISE(ABORT, 'appointments_bay_in_shop');
END;

-- The bay's side, as the key's: a bay that appointments of its shop use stays in that shop. (A
-- rare admin write: it walks the shop's appointments, as move_blocked's own check does.)
CREATE TRIGGER bays_keep_their_appointments BEFORE UPDATE OF shop_id ON bays
WHEN NEW.shop_id <> OLD.shop_id AND EXISTS (
    SELECT 1 FROM appointments a WHERE a.company_id = OLD.company_id AND a.shop_id = OLD.shop_id AND a.bay_id = OLD.id
)
BEGIN
    SELECT RAISE(ABORT, 'appointments_bay_in_shop');
END;
