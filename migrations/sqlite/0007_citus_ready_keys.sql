-- PostgreSQL's migration 0007 leads every tenant key with company_id (for Citus) and shards the
-- per-shop counters. SQLite is one process with one writer: neither applies, and the version
-- numbers stay in step.
SELECT 1;
