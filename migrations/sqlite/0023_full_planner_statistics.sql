-- Planner statistics read whole. Until this release a server's shutdown ran a plain
-- `PRAGMA optimize`, which since SQLite 3.46 reads a sample of 2,000 index entries: at a
-- million appointments of one company it stored 2,001 rows per company, per shop and per
-- customer (in truth 1,000,000, 20,000 and 6), and the start, which reads statistics whole,
-- only refreshes tables that lack them or grew 25-fold. (0022 is PostgreSQL's own.)
ANALYZE;
