//! The schema keeps tenancy in its keys: every tenant table carries `company_id`, and on
//! PostgreSQL every primary key, unique index and foreign key between tenant tables includes it,
//! which is what Citus needs to distribute the tables by company (docs/scaling.md).

use autoshop::db::Query;

use crate::support::{Backend, TestApp};

crate::backend_tests!(every_tenant_table_is_keyed_by_company);

/// Tables that are not per tenant: the company list, API keys (found by hash before the company
/// is known; Citus reference tables) and the migrator's bookkeeping.
const NOT_TENANT: [&str; 3] = ["companies", "api_keys", "_sqlx_migrations"];

#[derive(autoshop::db::FromRow)]
struct Violation {
    table_name: String,
    problem: String,
}

async fn every_tenant_table_is_keyed_by_company(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let not_tenant = NOT_TENANT.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
    let sql = match backend {
        // SQLite: every table (FTS shadow tables aside) has the column.
        Backend::Sqlite => format!(
            "SELECT name AS table_name, 'no company_id column' AS problem FROM sqlite_master t \
             WHERE type = 'table' AND name NOT IN ({not_tenant}) AND name NOT LIKE 'customers_search%' AND name NOT LIKE 'sqlite_%' \
             AND NOT EXISTS (SELECT 1 FROM pragma_table_info(t.name) WHERE name = 'company_id')"
        ),
        Backend::Postgres => format!(
            "WITH tenant AS (
                SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname NOT IN ({not_tenant})
             ), company_col AS (
                SELECT t.oid, a.attnum FROM tenant t JOIN pg_attribute a ON a.attrelid = t.oid AND a.attname = 'company_id'
             )
             SELECT t.relname::text AS table_name, 'no company_id column' AS problem FROM tenant t
                 WHERE NOT EXISTS (SELECT 1 FROM company_col c WHERE c.oid = t.oid)
             UNION ALL
             SELECT t.relname::text, 'no primary key' FROM tenant t
                 WHERE NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = t.oid AND i.indisprimary)
             UNION ALL
             SELECT t.relname::text, 'unique index ' || i.indexrelid::regclass::text || ' without company_id'
                 FROM tenant t JOIN pg_index i ON i.indrelid = t.oid AND i.indisunique JOIN company_col c ON c.oid = t.oid
                 WHERE NOT (c.attnum = ANY (i.indkey::int2[]))
             UNION ALL
             SELECT t.relname::text, 'foreign key ' || k.conname || ' without company_id'
                 FROM tenant t JOIN pg_constraint k ON k.conrelid = t.oid AND k.contype = 'f'
                 JOIN company_col c ON c.oid = t.oid JOIN pg_class r ON r.oid = k.confrelid
                 WHERE r.relname NOT IN ({not_tenant}) AND NOT (c.attnum = ANY (k.conkey))"
        ),
    };
    let violations: Vec<Violation> = app.db.fetch_all(&Query::new(sql)).await.unwrap();
    let listed: Vec<String> = violations.iter().map(|v| format!("{}: {}", v.table_name, v.problem)).collect();
    assert!(listed.is_empty(), "tables that break the tenancy key rule:\n{}", listed.join("\n"));
}
