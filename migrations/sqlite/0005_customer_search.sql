-- Substring search on customers (filter[first_name|last_name|address|phone]) through a trigram
-- index, so it does not read every customer of the company (issue #5: p99 under 50 ms on 200k
-- customers). The FTS table indexes the lower-cased keys the filters compare; triggers keep it
-- in step with customers inside the writing transaction.
CREATE VIRTUAL TABLE customers_search USING fts5(
    first_name_key, last_name_key, address_key, phone_digits,
    content = 'customers', content_rowid = 'id', tokenize = 'trigram'
);

CREATE TRIGGER customers_search_insert AFTER INSERT ON customers BEGIN
    INSERT INTO customers_search (rowid, first_name_key, last_name_key, address_key, phone_digits)
        VALUES (NEW.id, NEW.first_name_key, NEW.last_name_key, NEW.address_key, NEW.phone_digits);
END;

CREATE TRIGGER customers_search_delete AFTER DELETE ON customers BEGIN
    INSERT INTO customers_search (customers_search, rowid, first_name_key, last_name_key, address_key, phone_digits)
        VALUES ('delete', OLD.id, OLD.first_name_key, OLD.last_name_key, OLD.address_key, OLD.phone_digits);
END;

CREATE TRIGGER customers_search_update AFTER UPDATE OF first_name_key, last_name_key, address_key, phone_digits ON customers BEGIN
    INSERT INTO customers_search (customers_search, rowid, first_name_key, last_name_key, address_key, phone_digits)
        VALUES ('delete', OLD.id, OLD.first_name_key, OLD.last_name_key, OLD.address_key, OLD.phone_digits);
    INSERT INTO customers_search (rowid, first_name_key, last_name_key, address_key, phone_digits)
        VALUES (NEW.id, NEW.first_name_key, NEW.last_name_key, NEW.address_key, NEW.phone_digits);
END;

INSERT INTO customers_search (customers_search) VALUES ('rebuild');
