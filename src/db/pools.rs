use std::{str::FromStr, time::Duration};

use anyhow::Context;
use sqlx::{
    AssertSqlSafe, PgPool, Postgres, Sqlite, SqlitePool,
    postgres::{PgConnectOptions, PgPoolOptions},
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
};

use super::{Arg, DbError, Query, Row};

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

#[derive(Debug, Clone)]
pub struct DbConfig {
    pub url: String,
    /// PostgreSQL pool size, or the number of SQLite read connections.
    pub max_connections: u32,
}

/// The application's database handle: cheap to clone, shared by every request.
#[derive(Clone, Debug)]
pub enum Db {
    /// SQLite allows one writer at a time, so writes go through a single connection and reads
    /// through a pool of read-only ones; WAL lets them run side by side.
    Sqlite { writer: SqlitePool, reader: SqlitePool },
    Postgres(PgPool),
}

macro_rules! bind_all {
    ($q:expr) => {{
        let mut out = sqlx::query(AssertSqlSafe($q.sql.as_str()));
        for arg in &$q.args {
            out = match arg {
                Arg::I64(v) => out.bind(*v),
                Arg::F64(v) => out.bind(*v),
                Arg::Text(v) => out.bind(v.clone()),
                Arg::Bool(v) => out.bind(*v),
            };
        }
        out
    }};
}

/// Runs one statement on an executor of either backend, decoding rows with `FromRow`.
macro_rules! run {
    (all, $exec:expr, $q:expr) => {{
        let rows = bind_all!($q).fetch_all($exec).await?;
        rows.iter().map(|r| sqlx::FromRow::from_row(r)).collect::<Result<Vec<_>, _>>()?
    }};
    (optional, $exec:expr, $q:expr) => {{
        match bind_all!($q).fetch_optional($exec).await? {
            Some(r) => Some(sqlx::FromRow::from_row(&r)?),
            None => None,
        }
    }};
    (execute, $exec:expr, $q:expr) => {{
        bind_all!($q).execute($exec).await?.rows_affected()
    }};
}

impl Db {
    pub async fn connect(config: &DbConfig) -> anyhow::Result<Db> {
        let url = config.url.as_str();
        if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)
                .with_context(|| format!("invalid SQLite URL {url}"))?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                // FULL: a commit is on disk before we answer 2xx, even across a power cut.
                .synchronous(SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(5))
                .foreign_keys(true)
                .pragma("temp_store", "memory")
                .pragma("cache_size", "-32000");
            let writer = SqlitePoolOptions::new()
                .max_connections(1)
                .acquire_timeout(Duration::from_secs(10))
                .connect_with(options.clone())
                .await
                .with_context(|| format!("opening SQLite database {url}"))?;
            let reader = SqlitePoolOptions::new()
                .max_connections(config.max_connections.max(1))
                .acquire_timeout(Duration::from_secs(10))
                .connect_with(options.read_only(true))
                .await
                .with_context(|| format!("opening SQLite database {url} for reading"))?;
            Ok(Db::Sqlite { writer, reader })
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            let options = PgConnectOptions::from_str(url).with_context(|| "invalid PostgreSQL URL")?;
            let pool = PgPoolOptions::new()
                .max_connections(config.max_connections.max(1))
                .acquire_timeout(Duration::from_secs(5))
                // Connect lazily so a replica can start while the database is still coming up;
                // `/readyz` reports when it is reachable.
                .connect_lazy_with(options);
            Ok(Db::Postgres(pool))
        } else {
            anyhow::bail!("unsupported database URL {url:?}: use sqlite://FILE or postgres://...")
        }
    }

    /// Brings the schema up to date. Safe to run from several processes at once: PostgreSQL's
    /// migrator holds an advisory lock, and SQLite serialises writers.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        match self {
            Db::Sqlite { writer, .. } => SQLITE_MIGRATIONS.run(writer).await?,
            Db::Postgres(pool) => POSTGRES_MIGRATIONS.run(pool).await?,
        }
        Ok(())
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Db::Sqlite { .. } => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    pub async fn fetch_all<T: Row>(&self, q: &Query) -> Result<Vec<T>, DbError> {
        Ok(match self {
            Db::Sqlite { reader, .. } => run!(all, reader, q),
            Db::Postgres(pool) => run!(all, pool, q),
        })
    }

    pub async fn fetch_optional<T: Row>(&self, q: &Query) -> Result<Option<T>, DbError> {
        Ok(match self {
            Db::Sqlite { reader, .. } => run!(optional, reader, q),
            Db::Postgres(pool) => run!(optional, pool, q),
        })
    }

    /// A single write statement (auto-committed).
    pub async fn execute(&self, q: &Query) -> Result<u64, DbError> {
        Ok(match self {
            Db::Sqlite { writer, .. } => run!(execute, writer, q),
            Db::Postgres(pool) => run!(execute, pool, q),
        })
    }

    /// A single write statement that returns rows (`INSERT ... RETURNING`).
    pub async fn write_fetch_optional<T: Row>(&self, q: &Query) -> Result<Option<T>, DbError> {
        Ok(match self {
            Db::Sqlite { writer, .. } => run!(optional, writer, q),
            Db::Postgres(pool) => run!(optional, pool, q),
        })
    }

    /// Starts a write transaction. On SQLite it takes the write lock up front (`BEGIN IMMEDIATE`)
    /// so a transaction that reads before it writes never fails half-way on a busy database.
    pub async fn begin(&self) -> Result<Tx, DbError> {
        Ok(match self {
            Db::Sqlite { writer, .. } => Tx::Sqlite(writer.begin_with("BEGIN IMMEDIATE").await?),
            Db::Postgres(pool) => Tx::Postgres(pool.begin().await?),
        })
    }

    pub async fn ping(&self) -> Result<(), DbError> {
        let q = Query::new("SELECT 1");
        match self {
            Db::Sqlite { reader, .. } => run!(execute, reader, &q),
            Db::Postgres(pool) => run!(execute, pool, &q),
        };
        Ok(())
    }

    /// `(pool name, open connections, idle connections)` for the metrics endpoint.
    pub fn pool_stats(&self) -> Vec<(&'static str, u32, usize)> {
        match self {
            Db::Sqlite { writer, reader } => vec![
                ("sqlite_writer", writer.size(), writer.num_idle()),
                ("sqlite_reader", reader.size(), reader.num_idle()),
            ],
            Db::Postgres(pool) => vec![("postgres", pool.size(), pool.num_idle())],
        }
    }

    pub async fn close(&self) {
        match self {
            Db::Sqlite { writer, reader } => {
                reader.close().await;
                writer.close().await;
            }
            Db::Postgres(pool) => pool.close().await,
        }
    }
}

/// A write transaction on either backend. Dropped without `commit`, it rolls back.
pub enum Tx {
    Sqlite(sqlx::Transaction<'static, Sqlite>),
    Postgres(sqlx::Transaction<'static, Postgres>),
}

impl Tx {
    pub async fn fetch_all<T: Row>(&mut self, q: &Query) -> Result<Vec<T>, DbError> {
        Ok(match self {
            Tx::Sqlite(tx) => run!(all, &mut **tx, q),
            Tx::Postgres(tx) => run!(all, &mut **tx, q),
        })
    }

    pub async fn fetch_optional<T: Row>(&mut self, q: &Query) -> Result<Option<T>, DbError> {
        Ok(match self {
            Tx::Sqlite(tx) => run!(optional, &mut **tx, q),
            Tx::Postgres(tx) => run!(optional, &mut **tx, q),
        })
    }

    pub async fn execute(&mut self, q: &Query) -> Result<u64, DbError> {
        Ok(match self {
            Tx::Sqlite(tx) => run!(execute, &mut **tx, q),
            Tx::Postgres(tx) => run!(execute, &mut **tx, q),
        })
    }

    pub async fn commit(self) -> Result<(), DbError> {
        match self {
            Tx::Sqlite(tx) => tx.commit().await?,
            Tx::Postgres(tx) => tx.commit().await?,
        }
        Ok(())
    }
}
