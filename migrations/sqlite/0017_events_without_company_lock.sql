-- PostgreSQL only: the events' foreign key to companies is dropped there (see the PostgreSQL
-- migration of the same number). SQLite's check is an index probe that locks nothing.
SELECT 1;
