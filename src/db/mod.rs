//! Storage: SQLite (rusqlite) or PostgreSQL (sqlx) behind one small API.
//!
//! Feature stores write SQL once (see [`Query`]) and decode rows into types deriving
//! [`FromRow`], which decode from either backend. Instants are stored as integer microseconds
//! since the epoch and money as integer cents, so both backends compare and sort them the same
//! way. Features never learn which driver runs under them.

mod merged;
pub mod noticed;
pub mod notify;
pub mod page;
mod postgres;
mod query;
mod row;
mod scope;
pub mod sqlite;

use std::sync::Arc;

pub use autoshop_macros::FromRow;
pub use query::{Arg, Query, capped_term, fold_case, like_contains, like_prefix, search_term};
pub use row::{Decode, FromRow, RowReader};
pub use scope::{ShopFilter, company_row};
use postgres::Pg;
use sqlite::{SqliteDb, SqliteTx};

#[derive(Debug, Clone)]
pub struct DbConfig {
    pub url: String,
    /// PostgreSQL pool size, or the number of SQLite read connections.
    pub max_connections: u32,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum DbError {
    /// A unique constraint rejected the write; the store maps it to the field it guards.
    #[error("unique constraint violated")]
    Unique,
    /// An exclusion rule rejected the write: two live slot holds on one bay overlapping in time
    /// (a PostgreSQL exclusion constraint, a SQLite trigger).
    #[error("overlapping hold")]
    Overlap,
    /// An appointment's write named a bay that is not (any more) a bay of its shop: the bay
    /// moved after the write was validated (a PostgreSQL foreign key, a SQLite trigger).
    #[error("the bay is not in the appointment's shop")]
    BayNotInShop,
    /// A statement that must return a row returned none.
    #[error("the statement returned no row")]
    NoRow,
    /// What a change was computed from no longer holds as it writes ([`Tx::still_holds`]): a
    /// shop's time zone changed after an appointment's local times were derived from it.
    #[error("a value the change was computed from changed")]
    Outdated,
    /// The database could not be reached (down, pool exhausted, connection lost, busy).
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Other(String),
}

/// The name of the rule that keeps an appointment's bay in its shop (migration 0021).
const BAY_IN_SHOP: &str = "appointments_bay_in_shop";

impl From<sqlx::Error> for DbError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => DbError::Unique,
            sqlx::Error::Database(d) if d.code().as_deref() == Some("23P01") => DbError::Overlap,
            sqlx::Error::Database(d) if d.is_foreign_key_violation() && d.constraint() == Some(BAY_IN_SHOP) => DbError::BayNotInShop,
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Tls(_) => DbError::Unavailable(e.to_string()),
            // PostgreSQL shutting down / starting up / too many connections; or the transaction
            // was undone as a deadlock's victim or by a serialization failure, which a retry
            // most likely gets past (a 503 with `Retry-After`, not a 500: nothing was written).
            sqlx::Error::Database(d)
                if d.code().is_some_and(|c| c.starts_with("57P") || c == "53300" || c.starts_with("08") || c == "40P01" || c == "40001") =>
            {
                DbError::Unavailable(e.to_string())
            }
            _ => DbError::Other(e.to_string()),
        }
    }
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ffi::ErrorCode;
        match &e {
            rusqlite::Error::SqliteFailure(f, _) => match f.code {
                ErrorCode::ConstraintViolation
                    if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                        || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
                {
                    DbError::Unique
                }
                ErrorCode::ConstraintViolation if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_TRIGGER => match &e {
                    rusqlite::Error::SqliteFailure(_, Some(message)) if message == BAY_IN_SHOP => DbError::BayNotInShop,
                    _ => DbError::Overlap,
                },
                // Busy beyond the busy timeout, the disk full or failing, the file gone.
                ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::SystemIoFailure
                | ErrorCode::DiskFull
                | ErrorCode::CannotOpen
                | ErrorCode::ReadOnly => DbError::Unavailable(e.to_string()),
                _ => DbError::Other(e.to_string()),
            },
            _ => DbError::Other(e.to_string()),
        }
    }
}

/// Microseconds since the Unix epoch: how every instant is stored.
pub fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// The application's database handle: cheap to clone, shared by every request.
#[derive(Clone, Debug)]
pub enum Db {
    /// SQLite allows one writer at a time, so writes go through a single connection (on its own
    /// thread, in group commits) and reads through a pool of read-only ones; WAL lets them run
    /// side by side.
    Sqlite(Arc<SqliteDb>),
    Postgres(Pg),
}

impl Db {
    pub async fn connect(config: &DbConfig) -> anyhow::Result<Db> {
        let url = config.url.as_str();
        if url.starts_with("sqlite:") {
            Ok(Db::Sqlite(Arc::new(SqliteDb::open(url, config.max_connections)?)))
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Ok(Db::Postgres(postgres::connect(url, config.max_connections)?))
        } else {
            anyhow::bail!("unsupported database URL {url:?}: use sqlite://FILE or postgres://...")
        }
    }

    /// Brings the schema up to date. Safe to run from several processes at once: PostgreSQL's
    /// migrator holds an advisory lock, and SQLite serialises writers.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        match self {
            Db::Sqlite(db) => db.migrate().await,
            Db::Postgres(pool) => postgres::migrate(pool).await,
        }
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    pub fn is_sqlite(&self) -> bool {
        matches!(self, Db::Sqlite(_))
    }

    pub async fn fetch_all<T: FromRow>(&self, q: &Query) -> Result<Vec<T>, DbError> {
        match self {
            Db::Sqlite(db) => {
                let q = q.clone();
                db.read(move |conn| sqlite::fetch_all(conn, &q)).await
            }
            Db::Postgres(pool) => postgres::fetch_all(&**pool, q).await,
        }
    }

    pub async fn fetch_optional<T: FromRow>(&self, q: &Query) -> Result<Option<T>, DbError> {
        match self {
            Db::Sqlite(db) => {
                let q = q.clone();
                db.read(move |conn| sqlite::fetch_optional(conn, &q)).await
            }
            Db::Postgres(pool) => postgres::fetch_optional(&**pool, q).await,
        }
    }

    /// Several statements read together: on SQLite in one read transaction on one connection
    /// (one snapshot, and one acquisition of the WAL read lock instead of one per statement);
    /// on PostgreSQL one after the other on one pooled connection, each seeing the latest
    /// commit as separate reads would. `reads` is a tuple of [`Rows`].
    pub async fn read_together<R: Reads>(&self, reads: R) -> Result<R::Output, DbError> {
        match self {
            Db::Sqlite(db) => db.read(move |conn| sqlite::in_snapshot(conn, |conn| reads.read_sqlite(conn))).await,
            Db::Postgres(pool) => {
                let mut conn = pool.acquire().await?;
                reads.read_postgres(&mut conn).await
            }
        }
    }

    /// Every row of `q`, in batches of up to `batch` rows (the first holds the first row alone, so
    /// that the receiver hears of a running read at once) through a channel of `depth` batches,
    /// read from a connection of its own (not the pool's: a slow consumer must not hold back
    /// other requests) in one snapshot. The reading stops when the receiver is dropped (a read
    /// still waiting for rows is interrupted); `guard` is held until then, with the connection
    /// (an export's permit). A read that fails or panics sends an error.
    pub fn stream<T: FromRow, G: Send + 'static>(&self, q: Query, batch: usize, depth: usize, guard: G) -> tokio::sync::mpsc::Receiver<Result<Vec<T>, DbError>> {
        let (sender, receiver) = tokio::sync::mpsc::channel(depth.max(1));
        let batch = batch.max(1);
        match self {
            Db::Sqlite(db) => db.stream(q, batch, sender, guard),
            Db::Postgres(pool) => postgres::stream(pool, q, batch, sender, guard),
        }
        receiver
    }

    /// A single write statement (committed on its own; on SQLite in the next group commit).
    pub async fn execute(&self, q: &Query) -> Result<u64, DbError> {
        match self {
            Db::Sqlite(db) => {
                let q = q.clone();
                db.write(move |conn| sqlite::execute(conn, &q)).await
            }
            Db::Postgres(pool) => postgres::execute(&**pool, q).await,
        }
    }

    /// A single write statement that returns a row (`INSERT ... RETURNING`).
    pub async fn write_fetch_optional<T: FromRow>(&self, q: &Query) -> Result<Option<T>, DbError> {
        match self {
            Db::Sqlite(db) => {
                let q = q.clone();
                db.write(move |conn| sqlite::fetch_optional(conn, &q)).await
            }
            Db::Postgres(pool) => postgres::fetch_optional(&**pool, q).await,
        }
    }

    /// Starts a write transaction. On SQLite it is a savepoint in the writer's next group
    /// commit, holding the writer from its first statement to its commit: keep it short and do
    /// no other I/O while it is open. On PostgreSQL it begins with its first statement (see
    /// [`Tx::commit_alone`]).
    pub async fn begin(&self) -> Result<Tx, DbError> {
        Ok(match self {
            Db::Sqlite(db) => Tx::Sqlite(db.begin().await?),
            Db::Postgres(pg) => Tx::Postgres(PgTx { tx: None, pg: pg.clone(), notices: Vec::new() }),
        })
    }

    /// Returns once every write that SQLite's writer has run so far is committed, and so seen
    /// by the read pool: the writer answers a write only after its group's commit, but a change
    /// refused because of another change of the same group (a guard, [`Tx::still_holds`]) hears
    /// of it at once, and must not read again before that other change shows. (A no-op write is
    /// answered after the commit of its group, which comes after every earlier job's.) On
    /// PostgreSQL a change shows as soon as it commits: nothing to wait for.
    pub async fn settle_writes(&self) -> Result<(), DbError> {
        match self {
            Db::Sqlite(db) => db.write(|_| Ok(())).await,
            Db::Postgres(_) => Ok(()),
        }
    }

    pub async fn ping(&self) -> Result<(), DbError> {
        let q = Query::new("SELECT CAST(1 AS BIGINT)");
        self.fetch_optional::<(i64,)>(&q).await.map(drop)
    }

    /// Changes sent as one statement outside a transaction ([`Tx::commit_alone`]) so far;
    /// `None` on SQLite, which never sends them.
    pub fn one_statement_changes(&self) -> Option<OneStatementCounts> {
        match self {
            Db::Sqlite(_) => None,
            Db::Postgres(pg) => Some(postgres::alone_counts(pg)),
        }
    }

    /// `(pool name, open connections, idle connections)` for the metrics endpoint.
    pub fn pool_stats(&self) -> Vec<(&'static str, u32, usize)> {
        match self {
            Db::Sqlite(db) => {
                let (size, idle) = db.reader_stats();
                vec![("sqlite_reader", size, idle)]
            }
            Db::Postgres(pool) => vec![("postgres", pool.size(), pool.num_idle())],
        }
    }

    /// Memory the embedded engine holds (SQLite's page caches and statements), for `/metrics`:
    /// it lets a leak check tell caches filling from memory that keeps growing.
    pub fn engine_memory_bytes(&self) -> Option<i64> {
        match self {
            // SAFETY: a read of SQLite's global memory counter, safe from any thread.
            Db::Sqlite(_) => Some(unsafe { rusqlite::ffi::sqlite3_memory_used() }),
            Db::Postgres(_) => None,
        }
    }

    pub async fn close(&self) {
        match self {
            Db::Sqlite(db) => db.close().await,
            Db::Postgres(pool) => pool.close().await,
        }
    }
}

/// Every row of a statement, decoded as `T`: what a store returns for a read that its caller
/// runs together with others ([`Db::read_together`]).
pub struct Rows<T> {
    query: Query,
    row: std::marker::PhantomData<fn() -> T>,
}

impl<T: FromRow> Rows<T> {
    pub fn of(query: Query) -> Rows<T> {
        Rows { query, row: std::marker::PhantomData }
    }
}

/// Statements read together ([`Db::read_together`]): a tuple of [`Rows`], read into a tuple of
/// `Vec`s.
pub trait Reads: Send + Sync + 'static {
    type Output: Send + 'static;
    fn read_sqlite(&self, conn: &rusqlite::Connection) -> Result<Self::Output, DbError>;
    fn read_postgres(&self, conn: &mut sqlx::PgConnection) -> impl std::future::Future<Output = Result<Self::Output, DbError>> + Send;
}

macro_rules! reads_of_tuples {
    ($($row:ident $index:tt),+) => {
        impl<$($row: FromRow),+> Reads for ($(Rows<$row>,)+) {
            type Output = ($(Vec<$row>,)+);

            fn read_sqlite(&self, conn: &rusqlite::Connection) -> Result<Self::Output, DbError> {
                Ok(($(sqlite::fetch_all::<$row>(conn, &self.$index.query)?,)+))
            }

            async fn read_postgres(&self, conn: &mut sqlx::PgConnection) -> Result<Self::Output, DbError> {
                Ok(($(postgres::fetch_all::<$row, _>(&mut *conn, &self.$index.query).await?,)+))
            }
        }
    };
}

reads_of_tuples!(A 0, B 1);
reads_of_tuples!(A 0, B 1, C 2);
reads_of_tuples!(A 0, B 1, C 2, D 3);

/// How changes sent as one statement ([`Tx::commit_alone`]) fared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OneStatementCounts {
    pub committed: u64,
    /// Of the committed, those that shared their statement with other changes.
    pub shared: u64,
    /// Refused to run outside a transaction (and ran in one).
    pub refused: u64,
}

/// A change whose writes are one statement ([`Tx::commit_alone`]): its parts, and `merge`,
/// which builds the statement of one or more such changes from their parts. The statement
/// writes every change it holds or none, and raises through `refuse_outside_transaction`
/// (migration 0016) when one of them must run in a transaction.
pub struct OneStatement {
    pub parts: Vec<Option<Query>>,
    pub merge: fn(&[Vec<Option<Query>>]) -> Query,
    /// Where the change goes in a statement it shares: changes are written in this order, so
    /// two statements that write rows of the same shops (their counters) lock those rows in
    /// one order and cannot deadlock. The shop the change is about, or 0.
    pub lock_order: i64,
}

impl OneStatement {
    /// See [`OneStatement::lock_order`].
    pub fn with_lock_order(self, lock_order: i64) -> OneStatement {
        OneStatement { lock_order, ..self }
    }
}

/// A write transaction on either backend. Dropped without `commit`, it rolls back.
pub enum Tx {
    Sqlite(SqliteTx),
    Postgres(PgTx),
}

pub struct PgTx {
    /// Begun by the first statement: a change whose only statement is its last one sends it
    /// without `BEGIN` and `COMMIT` ([`Tx::commit_alone`]).
    tx: Option<sqlx::Transaction<'static, sqlx::Postgres>>,
    pg: Pg,
    /// Sent once the transaction committed.
    notices: Vec<notify::Notice>,
}

impl PgTx {
    /// The transaction's connection, beginning the transaction if no statement did yet.
    async fn conn(&mut self) -> Result<&mut sqlx::PgConnection, DbError> {
        let tx = match &mut self.tx {
            Some(tx) => tx,
            none => none.insert(self.pg.begin().await?),
        };
        Ok(&mut **tx)
    }
}

impl Tx {
    pub async fn fetch_all<T: FromRow>(&mut self, q: &Query) -> Result<Vec<T>, DbError> {
        match self {
            Tx::Sqlite(tx) => {
                let q = q.clone();
                tx.run(move |conn| sqlite::fetch_all(conn, &q)).await
            }
            Tx::Postgres(t) => postgres::fetch_all(t.conn().await?, q).await,
        }
    }

    pub async fn fetch_optional<T: FromRow>(&mut self, q: &Query) -> Result<Option<T>, DbError> {
        match self {
            Tx::Sqlite(tx) => {
                let q = q.clone();
                tx.run(move |conn| sqlite::fetch_optional(conn, &q)).await
            }
            Tx::Postgres(t) => postgres::fetch_optional(t.conn().await?, q).await,
        }
    }

    pub async fn execute(&mut self, q: &Query) -> Result<u64, DbError> {
        match self {
            Tx::Sqlite(tx) => {
                let q = q.clone();
                tx.run(move |conn| sqlite::execute(conn, &q)).await
            }
            Tx::Postgres(t) => postgres::execute(t.conn().await?, q).await,
        }
    }


    /// An id for a new row of `table` reserved before its insert, where the backend gives
    /// one (PostgreSQL, from the table's sequence: [`postgres::next_id`]); `None` on SQLite,
    /// whose one writer assigns ids as it inserts.
    pub async fn reserve_id(&mut self, table: &'static str) -> Result<Option<i64>, DbError> {
        match self {
            Tx::Sqlite(_) => Ok(None),
            Tx::Postgres(PgTx { tx: Some(tx), pg, .. }) => postgres::next_id(pg, &mut **tx, table).await.map(Some),
            Tx::Postgres(PgTx { tx: None, pg, .. }) => postgres::next_id(pg, &**pg, table).await.map(Some),
        }
    }

    /// Sends `payload` on `channel` to every listener of every process once this transaction
    /// commits (and never if it does not). On PostgreSQL it is sent right after the commit, not
    /// inside the transaction (see `postgres::announce`).
    pub async fn notify(&mut self, channel: &str, payload: String) -> Result<(), DbError> {
        match self {
            Tx::Sqlite(tx) => {
                tx.notify(notify::Notice { channel: channel.to_owned(), payload });
                Ok(())
            }
            Tx::Postgres(t) => {
                t.notices.push(notify::Notice { channel: channel.to_owned(), payload });
                Ok(())
            }
        }
    }

    /// [`Tx::notify`] for a notice that must never be lost once the transaction commits (a key's
    /// revocation): on PostgreSQL a `NOTIFY` inside the transaction, which PostgreSQL delivers
    /// if and only if it commits, at the cost of serialising with other notifying commits (so
    /// ordinary notices go after the commit instead). SQLite's broadcast is in-process already.
    pub async fn notify_with_commit(&mut self, channel: &str, payload: String) -> Result<(), DbError> {
        if self.is_sqlite() {
            return self.notify(channel, payload).await;
        }
        self.execute(&Query::new("SELECT pg_notify($1, $2)").bind(channel).bind(payload)).await.map(|_| ())
    }

    /// Runs `last`'s statements and commits. On SQLite they run on the writer thread in the
    /// commit's own hand-off (each statement of a `Tx` otherwise costs one); on PostgreSQL they
    /// are sent one by one before `COMMIT`.
    pub async fn commit_with<F: Finish>(mut self, last: F) -> Result<F::Output, F::Error> {
        match self {
            Tx::Sqlite(tx) => tx.commit_with(move |conn| last.run_blocking(conn)).await,
            Tx::Postgres(_) => {
                let out = last.run(&mut self).await?;
                self.commit().await?;
                Ok(out)
            }
        }
    }

    /// Commits; on SQLite, answered once the group holding this transaction is on disk.
    pub async fn commit(self) -> Result<(), DbError> {
        match self {
            Tx::Sqlite(tx) => tx.commit().await,
            Tx::Postgres(t) => {
                if let Some(tx) = t.tx {
                    tx.commit().await?;
                }
                if !t.notices.is_empty() {
                    postgres::announce(&t.pg, t.notices);
                }
                Ok(())
            }
        }
    }

    pub fn is_sqlite(&self) -> bool {
        matches!(self, Tx::Sqlite(_))
    }

    /// Makes the writers of what row `id` of `table` owns (a shop's week, a bay's holds) wait
    /// for one another until commit: on PostgreSQL a `FOR NO KEY UPDATE` lock on the row, which
    /// leaves inserts referencing it alone; SQLite's one writer runs them one at a time already.
    pub async fn lock_row(&mut self, table: &'static str, company_id: i64, id: i64) -> Result<(), DbError> {
        if !self.is_sqlite() {
            let q = Query::new(format!("SELECT id FROM {table} WHERE company_id = $1 AND id = $2 FOR NO KEY UPDATE")).bind(company_id).bind(id);
            self.fetch_optional::<(i64,)>(&q).await?;
        }
        Ok(())
    }

    /// Whether `guard` (a `SELECT id ...` of at most one row) still finds its row. On
    /// PostgreSQL the row is locked `FOR KEY SHARE` as it is read: a transaction holding it
    /// `FOR UPDATE` (a shop's PUT) is waited for and the row read again as that one committed
    /// it, and one that comes later waits for this transaction to end.
    pub async fn still_holds(&mut self, guard: &Query) -> Result<bool, DbError> {
        let q = self.locking_guard(guard);
        Ok(self.fetch_optional::<(i64,)>(&q).await?.is_some())
    }

    /// `guard` as [`Tx::still_holds`] reads it: locked `FOR KEY SHARE` on PostgreSQL.
    pub fn locking_guard(&self, guard: &Query) -> Query {
        if self.is_sqlite() { guard.clone() } else { guard.clone().wrapped("", KEY_SHARE) }
    }

    /// Whether [`Tx::commit_alone`] may run: on PostgreSQL before any statement began the
    /// transaction. (SQLite's writer commits a whole change in one hand-off already.)
    pub fn can_commit_alone(&self) -> bool {
        matches!(self, Tx::Postgres(PgTx { tx: None, .. }))
    }

    /// Whether `company_id`'s changes skip [`Tx::commit_alone`] for now: one of them refused to
    /// run alone for a reason that lasts ([`Tx::skip_alone`]).
    pub fn skips_alone(&self, company_id: i64) -> bool {
        matches!(self, Tx::Postgres(t) if postgres::skips_alone(&t.pg, company_id))
    }

    /// Sends `company_id`'s changes straight to a transaction for a minute (their statements
    /// refuse to run alone while the company has webhooks).
    pub fn skip_alone(&self, company_id: i64) {
        if let Tx::Postgres(t) = self {
            postgres::skip_alone(&t.pg, company_id);
        }
    }

    /// Commits `change` as the whole transaction, before any statement began it, on
    /// PostgreSQL: one statement commits atomically and durably on its own, so `BEGIN` and
    /// `COMMIT` (two round trips of the three) are saved, and changes that arrive together go
    /// in one statement (see `db::merged`). Call it only when [`Tx::can_commit_alone`].
    /// `Ok(Err(reason))` when the change refused to run alone (a `refuse_outside_transaction(reason)`
    /// call in its statement raised, so nothing of it was written): run it in the transaction
    /// instead.
    pub async fn commit_alone(&mut self, change: OneStatement) -> Result<Result<(), String>, DbError> {
        let t = match self {
            Tx::Postgres(t @ PgTx { tx: None, .. }) => t,
            Tx::Postgres(_) => return Ok(Err("a statement began the transaction".into())),
            Tx::Sqlite(_) => return Ok(Err("SQLite runs a change in one hand-off".into())),
        };
        let outcome = merged::commit(&t.pg, change).await?;
        if outcome.is_ok() && !t.notices.is_empty() {
            postgres::announce(&t.pg, std::mem::take(&mut t.notices));
        }
        Ok(outcome)
    }
}

/// The last statements of a transaction, written for both ways of running them (see
/// [`Tx::commit_with`]).
pub trait Finish: Send + 'static {
    type Output: Send + 'static;
    /// Any error rolls the transaction back.
    type Error: From<DbError> + Send + 'static;
    /// On SQLite's writer thread, with its connection.
    fn run_blocking(self, conn: &rusqlite::Connection) -> Result<Self::Output, Self::Error>;
    /// Statement by statement on an open transaction (PostgreSQL).
    fn run(self, tx: &mut Tx) -> impl std::future::Future<Output = Result<Self::Output, Self::Error>> + Send;
}

/// Where a store reads one row: the database, or an open transaction, where the row is locked
/// until commit (`FOR UPDATE` on PostgreSQL; SQLite's one writer runs transactions one at a
/// time already), so a check made on it holds for the write that follows.
pub enum Reader<'a> {
    Db(&'a Db),
    Locked(&'a mut Tx),
}

impl Reader<'_> {
    pub async fn fetch_optional<T: FromRow>(self, q: Query) -> Result<Option<T>, DbError> {
        match self {
            Reader::Db(db) => db.fetch_optional(&q).await,
            Reader::Locked(tx) => tx.fetch_optional(&for_update(tx, q)).await,
        }
    }

    /// Every row of `q`, locked when read in a transaction (give `q` an `ORDER BY` there, so two
    /// transactions lock shared rows in one order).
    pub async fn fetch_all<T: FromRow>(self, q: Query) -> Result<Vec<T>, DbError> {
        match self {
            Reader::Db(db) => db.fetch_all(&q).await,
            Reader::Locked(tx) => tx.fetch_all(&for_update(tx, q)).await,
        }
    }

    /// The same reader for one more statement.
    pub fn again(&mut self) -> Reader<'_> {
        match self {
            Reader::Db(db) => Reader::Db(db),
            Reader::Locked(tx) => Reader::Locked(tx),
        }
    }
}

/// The lock a guard takes on PostgreSQL ([`Tx::still_holds`]): the one a foreign key's check
/// takes (an insert referencing the row, or an update changing the reference, holds it anyway).
/// It waits for a `FOR UPDATE` lock, not for other key-share locks.
pub const KEY_SHARE: &str = " FOR KEY SHARE";

/// `q` locking the rows it reads until `tx` commits: `FOR UPDATE` on PostgreSQL; SQLite's one
/// writer holds every row of its transaction already.
fn for_update(tx: &Tx, mut q: Query) -> Query {
    if !tx.is_sqlite() {
        q.push(" FOR UPDATE");
    }
    q
}

impl<'a> From<&'a Db> for Reader<'a> {
    fn from(db: &'a Db) -> Self {
        Reader::Db(db)
    }
}

impl<'a> From<&'a mut Tx> for Reader<'a> {
    fn from(tx: &'a mut Tx) -> Self {
        Reader::Locked(tx)
    }
}
