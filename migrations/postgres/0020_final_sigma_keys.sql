-- The lower-cased keys that filters, sorts and uniqueness read now write the Greek final sigma
-- (U+03C2) as sigma (U+03C3), as `db::fold_case` does: a capital sigma lower-cases to either by
-- its place in the word, so a term ending in one was not found inside a word where it stood in
-- the middle. Keys written before are folded the same way here. A bay title or source name that
-- folds to the key of another one of its shop keeps its key (the unique index would refuse it);
-- renaming one of the two folds it. (This file is ASCII: a database in another encoding than
-- UTF-8 converts the whole text, comments included, and can hold no sigma to fold anyway.)
DO $$
BEGIN
    IF getdatabaseencoding() <> 'UTF8' THEN
        RETURN;
    END IF;
    UPDATE customers SET
        first_name_key = replace(first_name_key, chr(962), chr(963)),
        last_name_key = replace(last_name_key, chr(962), chr(963)),
        business_name_key = replace(business_name_key, chr(962), chr(963)),
        address_key = replace(address_key, chr(962), chr(963))
    WHERE first_name_key LIKE '%' || chr(962) || '%' OR last_name_key LIKE '%' || chr(962) || '%' OR business_name_key LIKE '%' || chr(962) || '%' OR address_key LIKE '%' || chr(962) || '%';

    UPDATE appointments SET
        first_name_key = replace(first_name_key, chr(962), chr(963)),
        last_name_key = replace(last_name_key, chr(962), chr(963)),
        make_key = replace(make_key, chr(962), chr(963)),
        model_key = replace(model_key, chr(962), chr(963)),
        reason_key = replace(reason_key, chr(962), chr(963))
    WHERE first_name_key LIKE '%' || chr(962) || '%' OR last_name_key LIKE '%' || chr(962) || '%' OR make_key LIKE '%' || chr(962) || '%' OR model_key LIKE '%' || chr(962) || '%' OR reason_key LIKE '%' || chr(962) || '%';

    UPDATE ship_tos SET name_key = replace(name_key, chr(962), chr(963)) WHERE name_key LIKE '%' || chr(962) || '%';

    UPDATE bays SET title_key = replace(title_key, chr(962), chr(963))
    WHERE title_key LIKE '%' || chr(962) || '%' AND NOT EXISTS (
        SELECT 1 FROM bays o WHERE o.company_id = bays.company_id AND o.shop_id = bays.shop_id AND o.id <> bays.id
          AND replace(o.title_key, chr(962), chr(963)) = replace(bays.title_key, chr(962), chr(963))
    );

    UPDATE sources SET name_key = replace(name_key, chr(962), chr(963))
    WHERE name_key LIKE '%' || chr(962) || '%' AND NOT EXISTS (
        SELECT 1 FROM sources o WHERE o.company_id = sources.company_id AND o.shop_id = sources.shop_id AND o.id <> sources.id
          AND replace(o.name_key, chr(962), chr(963)) = replace(sources.name_key, chr(962), chr(963))
    );
END
$$;
