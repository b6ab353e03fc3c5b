//! PostgreSQL through sqlx: a pool per process, statements prepared and cached per connection.

use std::{str::FromStr, time::Duration};

use anyhow::Context;
use sqlx::{
    AssertSqlSafe, Executor, PgPool, Postgres,
    postgres::{PgArguments, PgConnectOptions, PgPoolOptions},
    query::Query as SqlxQuery,
};

use super::{Arg, DbError, FromRow, Query, RowReader};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

pub fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    let options = PgConnectOptions::from_str(url).context("invalid PostgreSQL URL")?;
    Ok(PgPoolOptions::new()
        .max_connections(max_connections.max(1))
        .acquire_timeout(Duration::from_secs(5))
        // Connect lazily so a replica can start while the database is still coming up;
        // `/readyz` reports when it is reachable.
        .connect_lazy_with(options))
}

/// Runs the migrations under sqlx's advisory lock, so replicas can start together.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    MIGRATIONS.run(pool).await?;
    Ok(())
}

fn bound(q: &Query) -> SqlxQuery<'_, Postgres, PgArguments> {
    let mut out = sqlx::query(AssertSqlSafe(q.sql.as_str()));
    for arg in &q.args {
        out = match arg {
            Arg::I64(v) => out.bind(*v),
            Arg::F64(v) => out.bind(*v),
            Arg::Text(v) => out.bind(v.clone()),
            Arg::Bool(v) => out.bind(*v),
        };
    }
    out
}

pub async fn fetch_all<'c, T: FromRow, E: Executor<'c, Database = Postgres>>(exec: E, q: &Query) -> Result<Vec<T>, DbError> {
    let rows = bound(q).fetch_all(exec).await?;
    rows.iter().map(|r| T::from_row(&mut RowReader::postgres(r))).collect()
}

pub async fn fetch_optional<'c, T: FromRow, E: Executor<'c, Database = Postgres>>(exec: E, q: &Query) -> Result<Option<T>, DbError> {
    match bound(q).fetch_optional(exec).await? {
        Some(r) => Ok(Some(T::from_row(&mut RowReader::postgres(&r))?)),
        None => Ok(None),
    }
}

pub async fn execute<'c, E: Executor<'c, Database = Postgres>>(exec: E, q: &Query) -> Result<u64, DbError> {
    Ok(bound(q).execute(exec).await?.rows_affected())
}
