use std::{str::FromStr, time::Duration};

use anyhow::Context;
use sqlx::{
    AssertSqlSafe, Executor, PgPool, Postgres, Sqlite, SqliteConnection, SqlitePool,
    postgres::{PgConnectOptions, PgPoolOptions},
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous},
};
use tokio::sync::{mpsc, oneshot};

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
    Sqlite { writer: SqlitePool, reader: SqlitePool, commits: GroupCommit },
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
                // Each SQLite connection keeps a private page cache: 32 MB on each of 16 readers
                // took the process past 600 MB under load (issue #5 asks for under 100 MB).
                // Readers keep SQLite's default 2 MB and let the OS page cache, shared by all,
                // hold the rest of the file; the writer keeps 32 MB for index updates.
                .connect_with(options.read_only(true).pragma("cache_size", "-2000"))
                .await
                .with_context(|| format!("opening SQLite database {url} for reading"))?;
            let commits = GroupCommit::start(writer.clone());
            Ok(Db::Sqlite { writer, reader, commits })
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
            Db::Sqlite { writer, .. } => {
                SQLITE_MIGRATIONS.run(writer).await?;
                // Give the planner statistics (sampled, so it stays quick on big files): without
                // them it can pick a poor index for range pages at a million rows.
                sqlx::query("PRAGMA analysis_limit = 1000").execute(writer).await?;
                sqlx::query("PRAGMA optimize = 0x10002").execute(writer).await?;
            }
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
            Db::Sqlite { commits, .. } => match commits.submit(q, false).await? {
                Done::Affected(n) => n,
                Done::Row(_) => 0,
            },
            Db::Postgres(pool) => run!(execute, pool, q),
        })
    }

    /// A single write statement that returns rows (`INSERT ... RETURNING`).
    pub async fn write_fetch_optional<T: Row>(&self, q: &Query) -> Result<Option<T>, DbError> {
        Ok(match self {
            Db::Sqlite { commits, .. } => match commits.submit(q, true).await? {
                Done::Row(Some(row)) => Some(sqlx::FromRow::from_row(&row)?),
                _ => None,
            },
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
            Db::Sqlite { writer, reader, .. } => vec![
                ("sqlite_writer", writer.size(), writer.num_idle()),
                ("sqlite_reader", reader.size(), reader.num_idle()),
            ],
            Db::Postgres(pool) => vec![("postgres", pool.size(), pool.num_idle())],
        }
    }

    pub async fn close(&self) {
        match self {
            Db::Sqlite { writer, reader, .. } => {
                reader.close().await;
                writer.close().await;
            }
            Db::Postgres(pool) => pool.close().await,
        }
    }
}

/// Group commit for SQLite's single-statement writes (`Db::execute`, `Db::write_fetch_optional`).
///
/// With `synchronous=FULL` every commit waits for an fsync (about 1.5 ms on the benchmark
/// machine), so one commit per request caps writes near 700 per second whatever the CPU can do
/// (issue #5 asks for 5,000 appointment creations per second). Writes are queued to one task
/// that takes every statement waiting, runs each in its own savepoint of one `BEGIN IMMEDIATE`
/// transaction (a failing statement rolls back alone and gets its own error, as it would in
/// autocommit), commits once, and only then answers each caller: an acknowledged write is on
/// disk, and many writes share one fsync. A lone write runs in autocommit as before.
#[derive(Clone, Debug)]
pub struct GroupCommit {
    queue: mpsc::Sender<Job>,
}

/// The most statements one commit carries.
const MAX_GROUP: usize = 256;

#[derive(Debug)]
struct Job {
    q: Query,
    want_row: bool,
    reply: oneshot::Sender<Result<Done, DbError>>,
}

#[derive(Debug)]
enum Done {
    Affected(u64),
    Row(Option<SqliteRow>),
}

impl GroupCommit {
    fn start(writer: SqlitePool) -> GroupCommit {
        let (queue, mut jobs) = mpsc::channel::<Job>(4 * MAX_GROUP);
        tokio::spawn(async move {
            let mut group = Vec::with_capacity(MAX_GROUP);
            while jobs.recv_many(&mut group, MAX_GROUP).await > 0 {
                run_group(&writer, std::mem::take(&mut group)).await;
            }
        });
        GroupCommit { queue }
    }

    async fn submit(&self, q: &Query, want_row: bool) -> Result<Done, DbError> {
        let (reply, answer) = oneshot::channel();
        let job = Job { q: q.clone(), want_row, reply };
        self.queue.send(job).await.map_err(|_| DbError::Unavailable(sqlx::Error::PoolClosed))?;
        answer.await.map_err(|_| DbError::Unavailable(sqlx::Error::WorkerCrashed))?
    }
}

async fn run_one(conn: &mut SqliteConnection, job: &Job) -> Result<Done, DbError> {
    let q = &job.q;
    Ok(if job.want_row { Done::Row(bind_all!(q).fetch_optional(&mut *conn).await?) } else { Done::Affected(run!(execute, &mut *conn, q)) })
}

async fn run_group(writer: &SqlitePool, group: Vec<Job>) {
    let mut conn = match writer.acquire().await {
        Ok(conn) => conn,
        Err(e) => {
            let message = e.to_string();
            for job in group {
                let _ = job.reply.send(Err(DbError::Unavailable(sqlx::Error::Protocol(message.clone()))));
            }
            return;
        }
    };
    if group.len() == 1 {
        let job = group.into_iter().next().expect("one job");
        let result = run_one(&mut conn, &job).await;
        let _ = job.reply.send(result);
        return;
    }
    let mut results = Vec::with_capacity(group.len());
    let outcome: Result<(), sqlx::Error> = async {
        conn.execute("BEGIN IMMEDIATE").await?;
        for job in &group {
            conn.execute("SAVEPOINT group_write").await?;
            let result = run_one(&mut conn, job).await;
            if result.is_err() {
                conn.execute("ROLLBACK TO group_write").await?;
            }
            conn.execute("RELEASE group_write").await?;
            results.push(result);
        }
        conn.execute("COMMIT").await?;
        Ok(())
    }
    .await;
    match outcome {
        Ok(()) => {
            for (job, result) in group.into_iter().zip(results) {
                let _ = job.reply.send(result);
            }
        }
        Err(e) => {
            // Nothing of the group is committed: every caller gets the failure.
            let _ = conn.execute("ROLLBACK").await;
            let message = e.to_string();
            for job in group {
                let _ = job.reply.send(Err(DbError::Unavailable(sqlx::Error::Protocol(message.clone()))));
            }
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
