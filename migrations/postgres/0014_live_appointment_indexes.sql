-- Lists show live appointments (`deleted_at IS NULL`) unless asked for the trashed ones
-- (decisions §10). With deleted_at in the indexes that serve date ranges, dates and updates, a
-- page's count and sort read the index alone instead of looking up every matching row in the
-- table (a week of one shop is ~180 lookups per request at a million appointments).
DROP INDEX appointments_company_start;
CREATE INDEX appointments_company_start ON appointments (company_id, start_at, deleted_at);
DROP INDEX appointments_company_shop_start;
CREATE INDEX appointments_company_shop_start ON appointments (company_id, shop_id, start_at, deleted_at);
DROP INDEX appointments_company_local;
CREATE INDEX appointments_company_local ON appointments (company_id, local_date, local_time, deleted_at);
DROP INDEX appointments_company_updated;
CREATE INDEX appointments_company_updated ON appointments (company_id, updated_at, deleted_at);
