-- The lower-cased keys that filters, sorts and uniqueness read now write the final sigma `ς` as
-- `σ` (`db::fold_case`): `ΚΑΣ` was not found in `ΚΑΣΤΡΟ`, whose key the server lower-cased to
-- "καστρο" while the term became "κας". Keys written before are folded the same way here. A
-- bay title or source name that folds to the key of another one of its shop keeps its key (the
-- unique index would refuse it); renaming one of the two folds it.
UPDATE customers SET
    first_name_key = replace(first_name_key, 'ς', 'σ'),
    last_name_key = replace(last_name_key, 'ς', 'σ'),
    business_name_key = replace(business_name_key, 'ς', 'σ'),
    address_key = replace(address_key, 'ς', 'σ')
WHERE first_name_key LIKE '%ς%' OR last_name_key LIKE '%ς%' OR business_name_key LIKE '%ς%' OR address_key LIKE '%ς%';

UPDATE appointments SET
    first_name_key = replace(first_name_key, 'ς', 'σ'),
    last_name_key = replace(last_name_key, 'ς', 'σ'),
    make_key = replace(make_key, 'ς', 'σ'),
    model_key = replace(model_key, 'ς', 'σ'),
    reason_key = replace(reason_key, 'ς', 'σ')
WHERE first_name_key LIKE '%ς%' OR last_name_key LIKE '%ς%' OR make_key LIKE '%ς%' OR model_key LIKE '%ς%' OR reason_key LIKE '%ς%';

UPDATE ship_tos SET name_key = replace(name_key, 'ς', 'σ') WHERE name_key LIKE '%ς%';

UPDATE bays SET title_key = replace(title_key, 'ς', 'σ')
WHERE title_key LIKE '%ς%' AND NOT EXISTS (
    SELECT 1 FROM bays o WHERE o.company_id = bays.company_id AND o.shop_id = bays.shop_id AND o.id <> bays.id
      AND replace(o.title_key, 'ς', 'σ') = replace(bays.title_key, 'ς', 'σ')
);

UPDATE sources SET name_key = replace(name_key, 'ς', 'σ')
WHERE name_key LIKE '%ς%' AND NOT EXISTS (
    SELECT 1 FROM sources o WHERE o.company_id = sources.company_id AND o.shop_id = sources.shop_id AND o.id <> sources.id
      AND replace(o.name_key, 'ς', 'σ') = replace(sources.name_key, 'ς', 'σ')
);
