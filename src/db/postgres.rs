//! PostgreSQL through sqlx: a pool per process, statements prepared and cached per connection.

use std::{
    collections::BTreeSet,
    ops::Deref,
    str::FromStr,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context;
use sqlx::{
    AssertSqlSafe, Executor, PgPool, Postgres,
    postgres::{PgArguments, PgConnectOptions, PgPoolOptions},
    query::Query as SqlxQuery,
};

use super::{Arg, DbError, FromRow, Query, RowReader, notify::Notice};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// A pool, and the sender of the notices its transactions commit.
#[derive(Clone, Debug)]
pub struct Pg {
    pool: PgPool,
    announcer: Arc<Announcer>,
}

impl Deref for Pg {
    type Target = PgPool;

    fn deref(&self) -> &PgPool {
        &self.pool
    }
}

pub fn connect(url: &str, max_connections: u32) -> anyhow::Result<Pg> {
    let options = PgConnectOptions::from_str(url).context("invalid PostgreSQL URL")?;
    let pool = PgPoolOptions::new()
        .max_connections(max_connections.max(1))
        .acquire_timeout(Duration::from_secs(5))
        // Connect lazily so a replica can start while the database is still coming up;
        // `/readyz` reports when it is reachable.
        .connect_lazy_with(options);
    Ok(Pg { pool, announcer: Arc::default() })
}

/// Notices to send once their transactions committed, outside any transaction: a `NOTIFY`
/// inside one takes a database-wide lock at commit, which would serialise every committing
/// writer. Notices that pile up while one send is on its way go together in the next.
#[derive(Debug, Default)]
struct Announcer {
    /// The notices waiting, and whether a task is sending.
    pending: Mutex<(BTreeSet<(String, String)>, bool)>,
}

/// Sends `notices` (of a committed transaction) soon, from a background task.
pub fn announce(pg: &Pg, notices: Vec<Notice>) {
    let mut pending = pg.announcer.pending.lock().unwrap_or_else(|e| e.into_inner());
    pending.0.extend(notices.into_iter().map(|n| (n.channel, n.payload)));
    if std::mem::replace(&mut pending.1, true) {
        return;
    }
    let pg = pg.clone();
    tokio::spawn(async move {
        loop {
            let batch: Vec<(String, String)> = {
                let mut pending = pg.announcer.pending.lock().unwrap_or_else(|e| e.into_inner());
                if pending.0.is_empty() {
                    pending.1 = false;
                    return;
                }
                let batch: Vec<(String, String)> = pending.0.iter().take(500).cloned().collect();
                for notice in &batch {
                    pending.0.remove(notice);
                }
                batch
            };
            let mut q = Query::new("SELECT ");
            for (i, (channel, payload)) in batch.iter().enumerate() {
                q.push(if i == 0 { "pg_notify(" } else { ", pg_notify(" });
                q.push_bind(channel.as_str()).push(", ").push_bind(payload.as_str()).push(")");
            }
            if let Err(e) = execute(&pg.pool, &q).await {
                tracing::warn!(error = %e, notices = batch.len(), "sending notices failed; listeners resync when they reconnect");
            }
        }
    });
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
