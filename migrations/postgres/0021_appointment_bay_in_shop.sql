-- An appointment's bay is a bay of its shop, and the database keeps it so: a foreign key from
-- the appointment's (company_id, shop_id, bay_id) to the bay's (company_id, shop_id, id). A
-- create or an update validates its bay before its transaction; a move of the bay to another
-- shop committed in between made it store an appointment of one shop on a bay of another. Now
-- that write fails (the API answers 422 on `column`). The key's check locks the bay's row
-- FOR KEY SHARE, and a bay's move is a key update (shop_id is in this constraint and in
-- `bays_shop_title`), so a move that locks the bay first waits for the creates in flight on it
-- and then sees them (bays::store::move_blocked), and a create behind a move sees the new shop.
ALTER TABLE bays ADD CONSTRAINT bays_company_shop_id UNIQUE (company_id, shop_id, id);
DROP INDEX bays_company_shop;
ALTER TABLE appointments ADD CONSTRAINT appointments_bay_in_shop
    FOREIGN KEY (company_id, shop_id, bay_id) REFERENCES bays (company_id, shop_id, id) NOT VALID;
-- Validated by 0022, outside this migration's transaction: adding the key NOT VALID locks the
-- two tables only for a moment, while a validation inside it would keep appointment writes
-- waiting for a scan of every appointment.
