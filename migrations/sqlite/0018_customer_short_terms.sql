-- PostgreSQL only: an index of each last name's characters and character pairs, for the total
-- of a one- or two-character `filter[last_name]` (see the PostgreSQL migration of the same
-- number). SQLite counts such a term by table scan within the target.
SELECT 1;
