//! PostgreSQL through sqlx: a pool per process, statements prepared and cached per connection.

use std::{
    collections::{BTreeSet, HashMap},
    ops::Deref,
    str::FromStr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use sqlx::{
    AssertSqlSafe, Executor, PgPool, Postgres,
    postgres::{PgArguments, PgConnectOptions, PgPoolOptions},
    query::Query as SqlxQuery,
};

use super::{Arg, DbError, FromRow, OneStatementCounts, Query, RowReader, merged::Merger, notify::Notice};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// A pool, the sender of the notices its transactions commit, the ids it reserved, and how its
/// changes sent as one statement fared.
#[derive(Clone, Debug)]
pub struct Pg {
    pool: PgPool,
    announcer: Arc<Announcer>,
    reserved: Arc<Mutex<HashMap<&'static str, Vec<i64>>>>,
    alone: Arc<Alone>,
    merger: Arc<Merger>,
}

/// Changes sent as one statement outside a transaction ([`super::Tx::commit_alone`]): the
/// companies whose changes refused to run that way for a lasting reason (webhooks), and when;
/// and how many committed and how many refused (for `/metrics`).
#[derive(Debug, Default)]
struct Alone {
    skip: Mutex<HashMap<i64, std::time::Instant>>,
    committed: AtomicU64,
    refused: AtomicU64,
    /// Of the committed, those that shared their statement with other changes.
    shared: AtomicU64,
}

/// How long a company whose change refused to run alone for a lasting reason goes straight to a
/// transaction.
const SKIP_ALONE_FOR: Duration = Duration::from_secs(60);

/// Whether `company_id`'s changes go straight to a transaction (see [`skip_alone`]).
pub fn skips_alone(pg: &Pg, company_id: i64) -> bool {
    let mut skip = pg.alone.skip.lock().unwrap_or_else(|e| e.into_inner());
    match skip.get(&company_id) {
        Some(since) if since.elapsed() < SKIP_ALONE_FOR => true,
        Some(_) => {
            skip.remove(&company_id);
            false
        }
        None => false,
    }
}

/// Sends `company_id`'s changes straight to a transaction for a while: a statement of theirs
/// refused to run alone for a reason that lasts (the company has webhooks).
pub fn skip_alone(pg: &Pg, company_id: i64) {
    let mut skip = pg.alone.skip.lock().unwrap_or_else(|e| e.into_inner());
    skip.retain(|_, since| since.elapsed() < SKIP_ALONE_FOR);
    skip.insert(company_id, std::time::Instant::now());
}

/// Changes sent as one statement so far: committed (and of those, how many shared their
/// statement with others), refused.
pub fn alone_counts(pg: &Pg) -> OneStatementCounts {
    OneStatementCounts {
        committed: pg.alone.committed.load(Ordering::Relaxed),
        shared: pg.alone.shared.load(Ordering::Relaxed),
        refused: pg.alone.refused.load(Ordering::Relaxed),
    }
}

impl Pg {
    pub(super) fn merger(&self) -> &Merger {
        &self.merger
    }
}

/// Ids taken from a table's sequence per round trip (see [`next_id`]).
const ID_BLOCK: i64 = 32;

/// The next id for a row of `table` (whose `id` is an identity column), from a block this
/// process reserved: a write that knows its row's id before the insert can build its answer and
/// events first and send them with the insert. Ids of a block are handed out in order; a block
/// is `ID_BLOCK` ids from the sequence, so replicas interleave and an id says nothing about
/// when its row committed (it never did: sequences are not transactional).
///
/// `conn` runs the reservation: the transaction's connection once it began (a second connection
/// from the pool, while holding one, could wait on a pool that requests like it exhausted).
pub async fn next_id<'c, E: Executor<'c, Database = Postgres>>(pg: &Pg, conn: E, table: &'static str) -> Result<i64, DbError> {
    if let Some(id) = pg.reserved.lock().unwrap_or_else(|e| e.into_inner()).get_mut(table).and_then(Vec::pop) {
        return Ok(id);
    }
    let q = Query::new("SELECT nextval(pg_get_serial_sequence($1, 'id')) FROM generate_series(1, $2)").bind(table).bind(ID_BLOCK);
    let block: Vec<(i64,)> = fetch_all(conn, &q).await?;
    let mut reserved = pg.reserved.lock().unwrap_or_else(|e| e.into_inner());
    // Kept highest first, so the lowest goes out next (another task may have added a block).
    let spare = reserved.entry(table).or_default();
    spare.extend(block.into_iter().map(|(id,)| id));
    spare.sort_unstable_by(|a, b| b.cmp(a));
    spare.pop().ok_or(DbError::NoRow)
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
        // No ping before each use: a round trip per statement batch that a busy server pays on
        // every request. A connection that broke while idle (a database restart) fails its
        // first statement instead, is dropped by the pool, and that one request answers 503.
        .test_before_acquire(false)
        // Connect lazily so a replica can start while the database is still coming up;
        // `/readyz` reports when it is reachable.
        .connect_lazy_with(options);
    Ok(Pg { pool, announcer: Arc::default(), reserved: Arc::default(), alone: Arc::default(), merger: Arc::default() })
}

/// Notices to send once their transactions committed, outside any transaction: a `NOTIFY`
/// inside one takes a database-wide lock at commit, which would serialise every committing
/// writer. Notices that pile up while one send is on its way, or during the short pause before
/// it, go together in the next, so a busy replica sends at most about one batch per
/// [`NOTICE_PAUSE`] however many transactions commit.
#[derive(Debug, Default)]
struct Announcer {
    /// The notices waiting, and whether a task is sending.
    pending: Mutex<(BTreeSet<(String, String)>, bool)>,
}

/// How long notices wait to be sent with the others that follow them (a change reaches the
/// streams of other replicas this much later, well within the second that §11 allows).
const NOTICE_PAUSE: Duration = Duration::from_millis(5);

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
            tokio::time::sleep(NOTICE_PAUSE).await;
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
            // A NOTIFY's transaction takes a transaction id, so its commit would wait for a WAL
            // flush like a write's: notices need no durability (listeners that miss some resync
            // when they reconnect), so this one commit skips the wait.
            let mut q = Query::new("SELECT set_config('synchronous_commit', 'off', true)");
            for (channel, payload) in &batch {
                q.push(", pg_notify(");
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

/// The SQLSTATE that `refuse_outside_transaction()` (migration 0016) raises.
const REFUSED_OUTSIDE_TRANSACTION: &str = "AS001";

/// Runs `q`, the statement of `changes` changes ([`super::merged`]), on its own (outside any
/// transaction), or tells why it refused to run that way (see [`super::Tx::commit_alone`]): its
/// error undid all of it.
pub async fn commit_statement<'c, E: Executor<'c, Database = Postgres>>(pg: &Pg, conn: E, q: &Query, changes: usize) -> Result<Result<(), String>, DbError> {
    match bound(q).execute(conn).await {
        Ok(_) => {
            pg.alone.committed.fetch_add(changes as u64, Ordering::Relaxed);
            if changes > 1 {
                pg.alone.shared.fetch_add(changes as u64, Ordering::Relaxed);
            }
            Ok(Ok(()))
        }
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(REFUSED_OUTSIDE_TRANSACTION) => {
            // A merged statement's changes are sent again one by one, and counted then.
            if changes == 1 {
                pg.alone.refused.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Err(e.message().to_owned()))
        }
        // A merged statement the database rejected (an ERROR, which ends the statement and
        // undoes it) goes again change by change. A FATAL or PANIC may come after the commit:
        // its outcome is unknown, so it is reported, never sent again.
        Err(sqlx::Error::Database(e)) if changes > 1 && rejected_statement(&*e) => Ok(Err(e.message().to_owned())),
        Err(e) => Err(e.into()),
    }
}

/// Whether `e` ended only the statement (severity ERROR), which PostgreSQL then undid.
fn rejected_statement(e: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
    e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().is_some_and(|e| e.severity() == sqlx::postgres::PgSeverity::Error)
}

/// Reads `q` on a connection of its own (outside the pool), sending its rows in batches (see
/// [`super::Db::stream`]). The rows come off the socket as the receiver takes them, so memory
/// stays bounded whatever the result's size.
pub fn stream<T: FromRow, G: Send + 'static>(pg: &Pg, q: Query, batch: usize, sender: tokio::sync::mpsc::Sender<Result<Vec<T>, DbError>>, guard: G) {
    use futures_util::TryStreamExt;
    use sqlx::Connection;
    // The export's connection is not the pool's, but a closed pool (shutdown) closes exports too.
    if pg.pool.is_closed() {
        let _ = sender.try_send(Err(sqlx::Error::PoolClosed.into()));
        return;
    }
    let options = pg.pool.connect_options();
    tokio::spawn(async move {
        use futures_util::FutureExt;
        let _guard = guard;
        let work = async {
            let mut conn = sqlx::PgConnection::connect_with(&options).await?;
            let mut rows = bound(&q).fetch(&mut conn);
            // The first batch is the first row alone: the receiver learns at once that the read runs.
            let (mut size, mut out) = (1, Vec::with_capacity(1));
            while let Some(row) = rows.try_next().await? {
                out.push(T::from_row(&mut RowReader::postgres(&row))?);
                if out.len() == size {
                    if sender.send(Ok(std::mem::replace(&mut out, Vec::with_capacity(batch)))).await.is_err() {
                        return Ok(());
                    }
                    size = batch;
                }
            }
            if !out.is_empty() {
                let _ = sender.send(Ok(out)).await;
            }
            drop(rows);
            let _ = conn.close().await;
            Ok::<(), DbError>(())
        };
        // A receiver gone (a download given up) ends a read still waiting for rows; a panic is an
        // error, so the body breaks instead of ending as if complete. The connection is dropped
        // with `work`, before the guard.
        let result = tokio::select! {
            result = std::panic::AssertUnwindSafe(work).catch_unwind() => {
                result.unwrap_or_else(|_| Err(DbError::Other("an export's read panicked".into())))
            }
            () = sender.closed() => Ok(()),
        };
        if let Err(e) = result {
            let _ = sender.send(Err(e)).await;
        }
    });
}
